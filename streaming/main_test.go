package streaming

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	// The fault tests kill Redis on purpose; go-redis would log every
	// refused dial.
	redis.SetLogger(quietLogger{})
	redistest.Main(m, &srv)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// waitDialersGone waits until go-redis's background dial probes, started
// when a dial failed, have ended (they do once a dial succeeds or the
// client is closed, checking once a second), so that goleak stays clean.
func waitDialersGone(t testing.TB) {
	t.Helper()
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "pool.(*ConnPool).tryDial")
	}, 5*time.Second, 20*time.Millisecond, "go-redis dial probes still running")
}

// testCtx returns a context that ends with the test, bounded so that a
// hung call fails the test instead of the suite.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newStream returns a stream with a unique tag and name on rdb (the shared
// server when nil).
func newStream(t testing.TB, rdb redis.UniversalClient, opts ...StreamOption) *Stream {
	t.Helper()
	if rdb == nil {
		rdb = srv.Client()
	}
	s, err := NewStream(rdb, redistest.Name(t), "jobs", opts...)
	require.NoError(t, err)
	return s
}

// fast are read options that keep tests short.
func fast() []SinkOption {
	return []SinkOption{WithBlockDuration(200 * time.Millisecond), WithBackoff(10*time.Millisecond, 100*time.Millisecond)}
}

func newSink(t testing.TB, s *Stream, group string, opts ...SinkOption) *Sink {
	t.Helper()
	sink, err := NewSink(testCtx(t), s, group, append(fast(), opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sink.Close(context.Background())) })
	return sink
}

// recv waits for one event or fails after d.
func recv(t testing.TB, ch <-chan *Event, d time.Duration) *Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "channel closed")
		return ev
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
		return nil
	}
}

// recvN receives n events.
func recvN(t testing.TB, ch <-chan *Event, n int, d time.Duration) []*Event {
	t.Helper()
	evs := make([]*Event, 0, n)
	deadline := time.After(d)
	for len(evs) < n {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "channel closed after %d events", len(evs))
			evs = append(evs, ev)
		case <-deadline:
			t.Fatalf("got %d of %d events within %v", len(evs), n, d)
		}
	}
	return evs
}

// errorLog collects what an error hook receives.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) hook(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *errorLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// ownServer starts a private server for tests that kill Redis or must not
// see other tests' clients.
func ownServer(t testing.TB) *redistest.Server {
	t.Helper()
	return redistest.Start(t)
}
