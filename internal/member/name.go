package member

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxNameSize is the longest name a process may give itself for
// operators (pool.WithName, queue.WithName), in bytes.
const MaxNameSize = 100

// CheckName checks a process's name for operators: 1 to MaxNameSize
// bytes of valid UTF-8 without control characters, so that a page or a
// terminal shows it as it is.
func CheckName(name string) error { return CheckText("name", name, MaxNameSize) }

// CheckText checks a name people read (what names it in errors): 1 to
// max bytes of valid UTF-8 without control characters.
func CheckText(what, name string, max int) error {
	if name == "" || len(name) > max {
		return fmt.Errorf("%s %q must be 1 to %d bytes", what, name, max)
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("%s %q must be valid UTF-8 without control characters", what, name)
		}
	}
	return nil
}
