package redistest

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Watchdog arms the watchdog (below) for a TestMain that does not use
// Main: call it before m.Run, with what to close before exiting, and the
// function it returns after m.Run.
func Watchdog(cleanup func()) (disarm func()) {
	// TestMain must parse the flags itself to read one (m.Run would
	// parse them later, racing the read).
	if !flag.Parsed() {
		flag.Parse()
	}
	limit := testTimeout()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); watchdog(limit, stop, cleanup) }()
	return func() { close(stop); <-done }
}

// watchdog ends a test binary that is about to reach go test's -timeout,
// a little before it, so that the tests still running are named last in
// the output. go test's own timeout names them first and then dumps every
// goroutine, so a log cut to its tail (as CI shows it) keeps only the
// dump's end and never says which test hung. The watchdog writes the same
// dump, then one line per test still running with where it waits, then
// closes what cleanup closes (the shared server) and exits with status 2.
// stop (closed once the tests end) disarms it.
func watchdog(limit time.Duration, stop <-chan struct{}, cleanup func()) {
	if limit <= 0 {
		return
	}
	margin := min(limit/10, 20*time.Second)
	t := time.NewTimer(limit - margin)
	defer t.Stop()
	select {
	case <-stop:
		return
	case <-t.C:
	}
	dump := allStacks()
	fmt.Fprintf(os.Stderr, "redistest: the tests are about to reach -test.timeout=%v; every goroutine:\n", limit)
	_, _ = os.Stderr.Write(dump)
	writeRunning(os.Stderr, dump, limit-margin)
	cleanup()
	os.Exit(2)
}

// testTimeout returns the binary's -test.timeout, or 0 for none.
func testTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return 0
	}
	d, _ := g.Get().(time.Duration)
	return d
}

// allStacks returns the stacks of every goroutine, growing its buffer
// until the whole dump fits.
func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// testFrame matches a test function's frame in a stack dump: the package
// path, then Test, Example or Benchmark and the name.
var testFrame = regexp.MustCompile(`^\S+\.((?:Test|Example|Benchmark)\w*)(?:\.func[\d.]+)?\(`)

// writeRunning writes to w one line per test goroutine of dump (one that
// runs in testing.tRunner) that is not waiting for its turn to run in
// parallel: the test's name and the file and line of the frame it waits
// in, its deepest frame in a _test.go file.
func writeRunning(w io.Writer, dump []byte, after time.Duration) {
	var lines []string
	for _, g := range bytes.Split(dump, []byte("\n\n")) {
		s := string(g)
		if !strings.Contains(s, "testing.tRunner(") || strings.Contains(s, "testing.(*T).Parallel(") {
			continue
		}
		name, where := "", ""
		frames := strings.Split(s, "\n")
		for i, f := range frames {
			if m := testFrame.FindStringSubmatch(f); m != nil && name == "" {
				name = m[1]
			}
			if where == "" && i+1 < len(frames) && strings.Contains(frames[i+1], "_test.go:") {
				where = strings.TrimSpace(frames[i+1])
				if j := strings.LastIndex(where, " +0x"); j > 0 {
					where = where[:j]
				}
			}
		}
		if name == "" || name == "TestMain" {
			continue // TestMain's goroutine runs the others
		}
		state := frames[0]
		if i := strings.Index(state, "["); i >= 0 {
			state = strings.TrimSuffix(state[i:], ":")
		}
		lines = append(lines, fmt.Sprintf("  %s %s at %s", name, state, where))
	}
	fmt.Fprintf(w, "redistest: tests still running after %v (%d):\n", after, len(lines))
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
