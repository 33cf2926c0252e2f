package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(planChildEnv) != "" {
		os.Exit(runPlanChild())
	}
	if os.Getenv(restartChildEnv) != "" {
		os.Exit(restartChild()) // a child process of TestRestartAfterSIGKILLWithinGrace
	}
	redistest.Main(m, &srv)
}

// recorder is a JobHandler that records what it was asked to do.
type recorder struct {
	mu         sync.Mutex
	running    map[string]int // key → times started and not stopped
	starts     map[string]int
	stops      map[string]int
	notified   map[string][][]byte
	failKeys   map[string]bool
	panicOn    string // "start", "stop" or "notify"
	startDelay time.Duration
}

func newRecorder() *recorder {
	return &recorder{running: map[string]int{}, starts: map[string]int{}, stops: map[string]int{},
		notified: map[string][][]byte{}, failKeys: map[string]bool{}}
}

var errTestStart = errors.New("test start failure")

func (r *recorder) Start(ctx context.Context, job *Job) error {
	if r.startDelay > 0 {
		time.Sleep(r.startDelay)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.panicOn == "start" {
		panic("boom in Start")
	}
	if r.failKeys[job.Key] {
		return errTestStart
	}
	r.starts[job.Key]++
	r.running[job.Key]++
	return nil
}

func (r *recorder) Stop(ctx context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops[key]++
	if r.running[key] > 0 {
		r.running[key]--
		if r.running[key] == 0 {
			delete(r.running, key)
		}
	}
	if r.panicOn == "stop" {
		panic("boom in Stop")
	}
	return nil
}

func (r *recorder) HandleNotification(ctx context.Context, key string, payload []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.panicOn == "notify" {
		panic("boom in HandleNotification")
	}
	r.notified[key] = append(r.notified[key], payload)
	return nil
}

func (r *recorder) runningKeys() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.running))
	for k, v := range r.running {
		out[k] = v
	}
	return out
}

// fastOpts are node options with short TTLs for tests.
func fastOpts(extra ...NodeOption) []NodeOption {
	return append([]NodeOption{
		WithWorkerTTL(time.Second),
		WithPendingJobTTL(2 * time.Second),
		WithWorkerShutdownTTL(5 * time.Second),
		WithJobSinkBlockDuration(time.Second),
	}, extra...)
}

// closeNodeWithin closes n, waiting 30 s at most: a Close that cannot
// end (Redis gone for good with a failed dispatch's withdrawal pending)
// then ends the test's cleanup instead of hanging it until go test's
// timeout, which prints no test's failure.
func closeNodeWithin(n *Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return n.Close(ctx)
}

// awaitSignal waits until ch is closed (or receives), and fails the test
// after 30 s: a signal that never comes fails the test instead of
// hanging it until go test's timeout, which prints no test's failure.
func awaitSignal[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30s", what)
	}
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// addNode adds a node to pool on rdb and closes it at the end of the test.
func addNode(t *testing.T, rdb redis.UniversalClient, pool string, opts ...NodeOption) *Node {
	t.Helper()
	n, err := AddNode(testCtx(t, 10*time.Second), rdb, pool, fastOpts(opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeNodeWithin(n) })
	return n
}

func addWorkers(t *testing.T, n *Node, h JobHandler, count int) []*Worker {
	t.Helper()
	var ws []*Worker
	for i := 0; i < count; i++ {
		w, err := n.AddWorker(testCtx(t, 10*time.Second), h)
		require.NoError(t, err)
		ws = append(ws, w)
	}
	return ws
}

// union merges running counts of several recorders.
func union(rs ...*recorder) map[string]int {
	out := map[string]int{}
	for _, r := range rs {
		for k, v := range r.runningKeys() {
			out[k] += v
		}
	}
	return out
}

func keyN(i int) string { return fmt.Sprintf("job-%04d", i) }
