package jsonstyle

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	snakeKey = regexp.MustCompile(`^[a-z0-9_]+$`)
	// otherUnit is a key naming a duration unit other than milliseconds.
	otherUnit = regexp.MustCompile(`_(ns|nanos|us|µs|micros|millis|s|sec|secs|seconds|m|min|mins|minutes|h|hours)$`)
	// timeLike is a string meant as a time.
	timeLike = regexp.MustCompile(`^\d{4}-\d\d-\d\dT`)
)

// Violations decodes the JSON data and lists where it leaves the style:
// a key not in snake_case, a key naming a duration unit other than
// milliseconds, a time that is not RFC 3339 in UTC. It returns the
// decoded value too, for more checks; an error if data is not JSON.
func Violations(data []byte) (any, []string, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, nil, err
	}
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snakeKey.MatchString(k) {
					out = append(out, fmt.Sprintf("key %s%s is not snake_case", path, k))
				}
				if otherUnit.MatchString(k) {
					out = append(out, fmt.Sprintf("key %s%s: durations are in ms", path, k))
				}
				walk(path+k+".", x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[].", x)
			}
		case string:
			if timeLike.MatchString(v) {
				if _, err := time.Parse(time.RFC3339, v); err != nil || !strings.HasSuffix(v, "Z") {
					out = append(out, fmt.Sprintf("%s is %s, not RFC 3339 in UTC", strings.TrimSuffix(path, "."), v))
				}
			}
		}
	}
	walk("", v)
	return v, out, nil
}

// At returns the value at path in a decoded JSON value v: keys and list
// indexes separated by dots ("tasks.0.id"); nil when there is none.
func At(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}
