package queue

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	redistest.Main(m, &srv)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// open opens a queue called name on the shared server and closes it when
// the test ends.
func open(t *testing.T, name string, opts ...Option) *Queue {
	t.Helper()
	q, err := Open(testCtx(t, 10*time.Second), srv.Client(), name, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, closeWithin(q)) })
	return q
}

// closeWithin closes q, waiting 30 s at most: a Close that cannot end
// (Redis gone for good with a failed Submit's withdrawal pending, a
// handler that ignores its ctx) then fails the test instead of hanging it
// until go test's timeout, which prints no test's failure.
func closeWithin(q *Queue) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return q.Close(ctx)
}

// awaitSignal waits until ch is closed (or receives), and fails the test
// after 30 s: a signal that never comes fails the test instead of
// hanging it until go test's timeout, which prints no test's failure.
func awaitSignal[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30s", what)
	}
}

// gate returns a channel for a test's handler to wait on and the function
// that opens it (once; more calls do nothing). The test's end opens it
// too, before the queues it opened earlier close (cleanups run last
// first): a test that fails before opening it then reports its failure,
// instead of hanging in Close, whose Stop waits for the handler.
func gate(t *testing.T) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(open)
	return ch, open
}

func serve(t *testing.T, q *Queue, h Handler, opts ...ServeOption) *Server {
	t.Helper()
	s, err := q.Serve(h, opts...)
	require.NoError(t, err)
	return s
}

// fastRetries makes failed attempts come back within milliseconds.
var fastRetries = WithBackoff(5*time.Millisecond, 20*time.Millisecond)

func wait(t *testing.T, f *Future, d time.Duration) ([]byte, error) {
	t.Helper()
	select {
	case <-f.Done():
	case <-time.After(d):
		t.Fatalf("task %s: no outcome within %v", f.ID(), d)
	}
	return f.Wait(context.Background())
}

func echo(_ context.Context, t *Task) ([]byte, error) {
	return []byte(fmt.Sprintf("%s#%d", t.Payload, t.Attempt)), nil
}

// storedTask is task id's fields as shard l stores them: the record of an
// unfinished task, else its own hash (an outcome, a dead letter, or an
// earlier version's task); empty when l holds neither.
func storedTask(t testing.TB, ctx context.Context, rdb redis.UniversalClient, l layout, id string) map[string]string {
	t.Helper()
	s, err := rdb.HGet(ctx, l.tasksOf(id), id).Result()
	if err == nil {
		m, err := decodeRecord(s)
		require.NoError(t, err)
		return m
	}
	require.ErrorIs(t, err, redis.Nil)
	m, err := rdb.HGetAll(ctx, l.task(id)).Result()
	require.NoError(t, err)
	return m
}

// toEarlierLayout stores the unfinished task id as a version before
// records did: a hash of its own with its fields, and set, not in tasks.
func toEarlierLayout(t testing.TB, ctx context.Context, rdb redis.UniversalClient, l layout, id string, set ...any) {
	t.Helper()
	s, err := rdb.HGet(ctx, l.tasksOf(id), id).Result()
	require.NoError(t, err, "task %s has no record", id)
	m, err := decodeRecord(s)
	require.NoError(t, err)
	args := []any{}
	for k, v := range m {
		args = append(args, k, v)
	}
	require.NoError(t, rdb.HSet(ctx, l.task(id), append(args, set...)...).Err())
	require.NoError(t, rdb.HDel(ctx, l.tasksOf(id), id).Err())
}

// records counts the records of unfinished tasks in shard l.
func records(t testing.TB, ctx context.Context, rdb redis.UniversalClient, l layout) int64 {
	t.Helper()
	var n int64
	iter := rdb.Scan(ctx, 0, l.tasksPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		n += rdb.HLen(ctx, iter.Val()).Val()
	}
	require.NoError(t, iter.Err())
	return n
}
