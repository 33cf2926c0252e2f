package shepherdtest_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing the
// test: Fatal ends its goroutine (as testing.T's does), Error does not.
// Cleanups go to the real test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	fatal  string
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// fatalOf runs fn with a recorder in a goroutine of its own and returns
// its Fatal message, "" when it did not call Fatal.
func fatalOf(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errors) > 0 {
		t.Errorf("unexpected Errorf calls: %q", r.errors)
	}
	return r.fatal
}
