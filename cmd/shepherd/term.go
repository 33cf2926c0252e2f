package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a terminal, where progress bars redraw
// in place; elsewhere (files, pipes, tests) they print plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
