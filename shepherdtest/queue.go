package shepherdtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// Queue is a queue opened for a test: a *queue.Queue (submit to it, pass
// it to the code under test) with Work, which serves it in the test's
// process until it is idle, and assertions on its tasks (AllTasks,
// RequireTask). Its methods are safe for concurrent use.
type Queue struct {
	*queue.Queue

	mu   sync.Mutex
	seen map[string][]byte // the payloads of the tasks Work ran, by id
}

// closeTimeout bounds a cleanup's Close or Shutdown.
const closeTimeout = 10 * time.Second

// OpenQueue opens the queue name on rdb (queue.Open with opts) and closes
// it when tb's test ends. It fails tb when Open fails.
func OpenQueue(tb testing.TB, rdb redis.UniversalClient, name string, opts ...queue.Option) *Queue {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	q, err := queue.Open(ctx, rdb, name, opts...)
	if err != nil {
		tb.Fatalf("shepherdtest: open queue %q: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := q.Close(ctx); err != nil {
			tb.Errorf("shepherdtest: close queue %q: %v", name, err)
		}
	})
	return &Queue{Queue: q, seen: map[string][]byte{}}
}

// WorkOption configures Work.
type WorkOption func(*workConfig)

type workConfig struct {
	serve     []queue.ServeOption
	dueWithin time.Duration
	timeout   time.Duration
}

// Work's defaults.
const (
	DefaultDueWithin   = 10 * time.Second
	DefaultWorkTimeout = 30 * time.Second
)

// WithServeOptions passes opts to Serve (queue.WithWorkers,
// queue.WithBackoff...). Defaults to none: Serve's defaults.
func WithServeOptions(opts ...queue.ServeOption) WorkOption {
	return func(c *workConfig) { c.serve = append(c.serve, opts...) }
}

// WithDueWithin sets how far ahead Work waits for delayed tasks and
// retries: those due within d of Work's start run, later ones are left
// as they are. Defaults to DefaultDueWithin.
func WithDueWithin(d time.Duration) WorkOption { return func(c *workConfig) { c.dueWithin = d } }

// WithWorkTimeout bounds Work: it fails the test when the queue is not
// idle d after Work started. Defaults to DefaultWorkTimeout.
func WithWorkTimeout(d time.Duration) WorkOption { return func(c *workConfig) { c.timeout = d } }

// idlePoll is how often Work reads the queue's depths.
const idlePoll = 10 * time.Millisecond

// Work serves the queue with h in this process until it is idle, then
// stops serving (Server.Stop) and returns. The queue is idle when no
// task is waiting or running and none is delayed or retrying with a due
// time within WithDueWithin of Work's start; tasks the handlers submit
// are run too. Work fails tb when Serve fails, when the queue is not
// idle within WithWorkTimeout (a paused queue, a tenant at capacity, a
// handler that does not return), or when Stop fails. It may be called
// again, after more Submits.
func (q *Queue) Work(tb testing.TB, h queue.Handler, opts ...WorkOption) {
	tb.Helper()
	if h == nil {
		tb.Fatal("shepherdtest: Work with a nil handler")
	}
	WorkWith(tb, q, queue.Resource[struct{}]{}, func(ctx context.Context, _ struct{}, t *queue.Task) ([]byte, error) {
		return h(ctx, t)
	}, opts...)
}

// WorkWith is Work with a resource owned by each worker, as
// queue.ServeWith.
func WorkWith[R any](tb testing.TB, q *Queue, res queue.Resource[R], h queue.ResourceHandler[R], opts ...WorkOption) {
	tb.Helper()
	cfg := workConfig{dueWithin: DefaultDueWithin, timeout: DefaultWorkTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	start := time.Now()
	srv, err := queue.ServeWith(q.Queue, res, func(ctx context.Context, r R, t *queue.Task) ([]byte, error) {
		q.mu.Lock()
		q.seen[t.ID] = t.Payload
		q.mu.Unlock()
		return h(ctx, r, t)
	}, cfg.serve...)
	if err != nil {
		tb.Fatalf("shepherdtest: serve queue %q: %v", q.Name(), err)
	}
	idleErr := q.awaitIdle(start.Add(cfg.timeout), start.Add(cfg.dueWithin))
	sctx, scancel := context.WithTimeout(context.Background(), closeTimeout)
	defer scancel()
	stopErr := srv.Stop(sctx)
	if idleErr != nil {
		tb.Fatalf("shepherdtest: queue %q not idle after %v: %v", q.Name(), cfg.timeout, idleErr)
	}
	if stopErr != nil {
		tb.Fatalf("shepherdtest: stop serving queue %q: %v", q.Name(), stopErr)
	}
}

// awaitIdle waits until the queue is idle twice in a row, idlePoll
// apart (the depths are read by several commands, between which a task
// may move), with horizon as the end of the due times it waits for. At
// deadline it returns what it last saw keep the queue busy.
func (q *Queue) awaitIdle(deadline, horizon time.Time) error {
	quiet := 0
	last := "nothing read yet"
	for {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		left, err := q.busy(ctx, horizon)
		cancel()
		switch {
		case err != nil:
			quiet, last = 0, err.Error()
		case left == "":
			if quiet++; quiet == 2 {
				return nil
			}
		default:
			quiet, last = 0, "left: "+left
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return errors.New(last)
		}
		time.Sleep(min(idlePoll, wait))
	}
}

// busy says what keeps the queue from being idle, "" when nothing does.
func (q *Queue) busy(ctx context.Context, horizon time.Time) (string, error) {
	st, err := q.Stats(ctx)
	if err != nil {
		return "", err
	}
	if st.Available > 0 || st.InFlight > 0 {
		return fmt.Sprintf("%d waiting (paused: %v), %d running", st.Available, st.Paused, st.InFlight), nil
	}
	for _, state := range []queue.State{queue.StateDelayed, queue.StateRetrying} {
		next, err := q.Tasks(ctx, state, 0, 1)
		if err != nil {
			return "", err
		}
		if len(next) > 0 && next[0].Due.Before(horizon) {
			return fmt.Sprintf("task %s %s, due %v", next[0].ID, state, next[0].Due.Format(time.RFC3339Nano)), nil
		}
	}
	return "", nil
}

// listPage is how many tasks AllTasks reads per call.
const listPage = 1000

// allStates are the states AllTasks lists, in its reading order.
var allStates = []queue.State{queue.StateWaiting, queue.StateDelayed, queue.StateRetrying, queue.StateActive,
	queue.StateDone, queue.StateDead, queue.StateCancelled}

// AllTasks lists every task the queue knows, in every state, oldest
// submitted first (by Redis's clock, to the millisecond: tasks submitted
// within one millisecond come by id): waiting, delayed, retrying and running
// ones, dead letters, and finished ones whose outcome is still kept
// (among the latest 10,000; see queue.Client.Tasks). A finished task's
// payload is not kept by the queue: AllTasks fills it in for the tasks
// Work ran. It fails tb when Redis does.
func (q *Queue) AllTasks(tb testing.TB) []queue.TaskInfo {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	byID := map[string]queue.TaskInfo{}
	for _, state := range allStates {
		for offset := 0; ; offset += listPage {
			page, err := q.Tasks(ctx, state, offset, listPage)
			if err != nil {
				tb.Fatalf("shepherdtest: list %s tasks of queue %q: %v", state, q.Name(), err)
			}
			for _, t := range page {
				if _, dup := byID[t.ID]; !dup { // it moved between two reads: the first is kept
					byID[t.ID] = t
				}
			}
			if len(page) < listPage {
				break
			}
		}
	}
	out := make([]queue.TaskInfo, 0, len(byID))
	q.mu.Lock()
	for _, t := range byID {
		if t.Payload == nil {
			t.Payload = q.seen[t.ID]
		}
		out = append(out, t)
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Submitted.Equal(out[j].Submitted) {
			return out[i].Submitted.Before(out[j].Submitted)
		}
		return out[i].ID < out[j].ID
	})
	return out
}
