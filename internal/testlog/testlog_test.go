package testlog

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Many goroutines log into one Buffer while it is read: every line is
// kept whole (run with -race).
func TestBufferTakesConcurrentWriters(t *testing.T) {
	var buf Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				logger.Info("line", "g", g, "i", i)
				_ = buf.String()
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("got %d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !strings.Contains(l, "msg=line") {
			t.Fatalf("a line was cut: %q", l)
		}
	}
	if !strings.Contains(buf.String(), fmt.Sprintf("g=%d i=%d", 7, 99)) {
		t.Fatal("a line is missing")
	}
}

// Lines returns the lines holding any of the strings asked for.
func TestLinesPicksTheLinesAskedFor(t *testing.T) {
	var buf Buffer
	fmt.Fprint(&buf, "one apple\ntwo pears\nthree apples and pears\nfour\n")
	got := buf.Lines("apple", "pear")
	if len(got) != 3 || got[0] != "one apple" || got[2] != "three apples and pears" {
		t.Fatalf("got %q", got)
	}
	if got := buf.Lines("plum"); len(got) != 0 {
		t.Fatalf("got %q, want none", got)
	}
}
