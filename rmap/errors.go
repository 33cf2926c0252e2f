package rmap

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these (or a
// Redis or context error) with the operation that failed; match them with
// errors.Is.
var (
	// ErrInvalidOption is wrapped by Join and KeysOf for bad input: a nil
	// client, an empty name, an invalid hash tag, a nil option or one with
	// an invalid value.
	ErrInvalidOption = errors.New("rmap: invalid option")
	// ErrEmptyKey is returned by every call given an empty key.
	ErrEmptyKey = errors.New("rmap: empty key")
	// ErrTooLarge is returned when a key, a value or a list value after an
	// append would exceed the map's maximum size (WithMaxValueSize).
	// Nothing is written.
	ErrTooLarge = errors.New("rmap: value too large")
	// ErrClosed is returned by calls on a Map after Close or Destroy.
	ErrClosed = errors.New("rmap: map closed")
	// ErrNotInteger is returned by Inc when the entry does not hold a
	// decimal 64-bit integer or the result would overflow. Nothing is
	// written.
	ErrNotInteger = errors.New("rmap: value is not an integer")
	// ErrNotList is returned by GetValues and the list writes when the
	// entry holds a value that AppendValues did not write. Nothing is
	// written.
	ErrNotList = errors.New("rmap: value is not a list")
	// ErrUnsynced is returned, wrapping the cause (a context error or
	// ErrClosed), when a write was committed in Redis but the local copy
	// could not be brought up to date before the call had to return. The
	// write's result is valid: do not blindly retry a write that returned
	// ErrUnsynced; call Sync, or read the result.
	ErrUnsynced = errors.New("rmap: write committed, local copy not yet updated")
)
