package main

import (
	"encoding/json"
	"io"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
)

// The CLI's JSON style, the same for every command's -json output and its
// errors, and for the dashboard's JSON twins: snake_case keys; a
// duration is a number of milliseconds, to the microsecond (2.28), under a
// key ending in "_ms"; a time is an RFC 3339 string in UTC
// ("2026-11-25T17:34:45.123Z"), or null when unset; a queue.Rate is
// {"n": 500, "per_ms": 1000, "burst": 10}, or null for no limit. The
// style is internal/jsonstyle's, which converts the library's structs as
// they are, so that a field added to them later is printed in it too.

// printJSON writes v in the CLI's JSON style on one line.
func printJSON(w io.Writer, v any) error {
	return jsonstyle.Encode(w, v)
}

// printJSONError writes err as {"error": "..."}, the error of a command
// run with -json.
func printJSONError(w io.Writer, err error) {
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
