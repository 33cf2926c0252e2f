// Package testlog holds what tests use to read what a component logs.
package testlog

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a log's text: a bytes.Buffer that a logger's goroutines may
// write to while a test reads it. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p (io.Writer).
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is the text written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines returns the lines written so far that contain any of subs.
func (l *Buffer) Lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		for _, s := range subs {
			if strings.Contains(line, s) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}
