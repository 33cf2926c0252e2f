package queue

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/group"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Queue is one process's handle on a named queue: it submits tasks,
// serves them (Serve) and inspects the queue. Open registers the process
// with a lease that it keeps alive every TTL/3; every process also
// declares dead the processes whose lease ran out, and gives their tasks
// back. A Queue is safe for concurrent use; Close it when done.
type Queue struct {
	Client // Stats, Inspect, Result, Cancel, DeadLetters, Replay, PurgeDead, Drain
	cfg    config
	proc   string
	logger *slog.Logger
	m      *metrics
	tasks  *group.Group // the process's loops
	// withdrawals takes back the tasks of failed Submits; Close waits
	// for it (with its ctx) after the loops.
	withdrawals *group.Group
	submits     []chan *submitReq // per shard: its Submits, for its submitters (submitLoop)

	pubsub subscription
	wake   chan struct{} // a task may be available: capacity 1
	woken  []atomic.Bool // per shard: woken since the feed last took from it

	roundRobin atomic.Uint64 // the shard of the tasks placed by none of their own, mod the shards (placeTask)
	kick       chan struct{} // keep alive now (a script found the process gone)

	started time.Time
	// leases holds, per shard, when (time since started) the last
	// keep-alive or registration that the shard accepted was sent: the
	// process's lease there runs at least TTL from then. Made at Open,
	// with the shards.
	leases []atomic.Int64

	mu      sync.Mutex
	closed  bool
	futures map[string]*Future
	owed    map[int][]string // per shard: ids a stopped server could not give back (owe)
	server  *Server
	serials int64 // servers made: a server's serial tells it apart from the process's earlier ones
	// withdrawing holds this process's failed Submits being withdrawn,
	// and those whose task a worker took first, by nonce (see
	// maybeWithdrawn).
	withdrawing  map[string]pendingWithdrawal
	nWithdrawing atomic.Int64 // len(withdrawing), read without the lock by every attempt

	// drained is the serial of the last server this process switched to
	// drain because Drain asked (keepAlive's; only keepAliveLoop uses it).
	drained int64

	testAfterPollRead func() // tests: runs between pollOutcomes' read and its verdicts

	toConfirm chan *Future // WithReplicas: futures whose outcome message came (confirmLoop)
	watched   atomic.Bool  // tests: watchLoop has read the masters' replication state
	// unconfirmedWarned is when outcomes last failed to be confirmed on
	// the replicas, logged (Unix ns; warnUnconfirmed).
	unconfirmedWarned atomic.Int64
	// replicasUp holds, per watcher (watchLoop: one, or one a shard on a
	// Redis Cluster), the replicas its master had connected at the last
	// read; -1 before any.
	replicasUp []atomic.Int64

	hist    history     // what this process saw since it last wrote the history
	janitor atomic.Bool // it holds the janitor lease (reapLoop): it samples the depth
}

// Open joins the queue called name on rdb and returns this process's
// handle on it. The name must be non-empty and must not contain "}".
//
// The queue-wide settings (WithTTL, WithMaxQueued, WithMaxDeadLetters)
// are stored with the queue by its first process. A process that does
// not set one adopts the stored value, whether another process of the
// queue is live or not: the defaults apply only to a new queue (or one
// whose Redis lost it). A process that sets one explicitly to another
// value is refused with an error wrapping ErrInvalidOption that names
// the setting and both values while another process of the queue is
// live; when none is, the values it sets replace the stored ones, and
// the others stay.
func Open(ctx context.Context, rdb redis.UniversalClient, name string, opts ...Option) (*Queue, error) {
	if redisutil.IsNil(rdb) {
		return nil, invalid("nil Redis client")
	}
	lay, err := queueLayout(name)
	if err != nil {
		return nil, err
	}
	lay.spub = shardedPubSub(rdb)
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, invalid("nil option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.checkReplicas(); err != nil {
		return nil, err
	}
	q := &Queue{
		Client:  Client{rdb: rdb, name: name, lay: lay},
		cfg:     cfg,
		proc:    randomID(8),
		wake:    make(chan struct{}, 1),
		kick:    make(chan struct{}, 1),
		started: time.Now(),
		futures: make(map[string]*Future),
	}
	q.logger = cfg.logger.With("queue", name, "process", q.proc)
	if cfg.ack.On() {
		q.toConfirm = make(chan *Future, 4096)
	}
	q.m = newMetrics(cfg.meterProvider, q)

	// Subscribe before registering: a wake-up or an outcome published
	// after Open returns must not be missed.
	q.pubsub = subscription{rdb: rdb, sharded: lay.spub}
	if err := q.pubsub.subscribe(ctx, lay.wakeChannel(), lay.drainChannel(), lay.doneChannel(q.proc), lay.cancelChannel(q.proc), lay.schedulesChannel()); err != nil {
		_ = q.pubsub.close()
		return nil, fmt.Errorf("queue: open %q: %w", name, err)
	}
	if _, err := q.register(ctx, false); err != nil {
		_ = q.pubsub.close()
		return nil, err
	}
	all := q.known()
	q.woken = make([]atomic.Bool, len(all))
	q.replicasUp = make([]atomic.Int64, len(all))
	for i := range q.replicasUp {
		q.replicasUp[i].Store(-1)
	}
	if len(all) > 1 {
		// The other shards' channels, now that their number is known (a
		// wake-up missed meanwhile is made up for: a server's first
		// round takes from every shard).
		for _, l := range all[1:] {
			if err := q.pubsub.subscribe(ctx, l.wakeChannel(), l.doneChannel(q.proc), l.cancelChannel(q.proc), l.schedulesChannel()); err != nil {
				_ = q.pubsub.close()
				return nil, fmt.Errorf("queue: open %q: %w", name, err)
			}
		}
	}
	q.tasks = group.New(context.Background())
	q.withdrawals = group.New(context.Background())
	q.submits = make([]chan *submitReq, len(all))
	for i := range all {
		q.submits[i] = make(chan *submitReq, 4096/len(all)+maxSubmitBatch)
		for range shardSubmitters(len(all)) {
			q.tasks.Go(func() { q.submitLoop(all[i], q.submits[i]) })
		}
	}
	msgs := q.pubsub.messages(q.tasks.Context(), q.tasks.Go)
	q.tasks.Go(func() { q.listen(msgs) })
	q.tasks.Go(q.keepAliveLoop)
	q.tasks.Go(q.reapLoop)
	q.tasks.Go(q.pollFutures)
	q.tasks.Go(q.watchLoop)
	if cfg.ack.On() {
		q.tasks.Go(q.confirmLoop)
	}
	q.tasks.Go(q.historyLoop)
	return q, nil
}

// Process returns this process's id in the queue (Stats lists it).
func (q *Queue) Process() string { return q.proc }

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newTaskID returns a random task (or batch) id: 16 characters of
// lowercase base32 (a-z, 2-7), short, since every task's keys and lists
// carry it: 70 random bits, as unguessable as needed, then the time in
// windows of 100 ms, modulo 1,024 (the tasks hash of its record, see
// layout.tasksOf). Two ids can only be equal when made in the same
// window (mod 1,024), and then with odds of 2^-70.
func newTaskID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	id := []byte(idEncoding.EncodeToString(b[:]))
	w := time.Now().UnixMilli() / 100
	id[14], id[15] = idAlphabet[w>>5&31], idAlphabet[w&31]
	return string(id)
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

var idEncoding = base32.NewEncoding(idAlphabet).WithPadding(base32.NoPadding)

// current returns the process's server, nil when it does not serve.
func (q *Queue) current() *Server {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.server
}

// loopCallTimeout bounds one Redis call of a background loop.
const loopCallTimeout = 5 * time.Second

// listen handles the process's pub/sub messages: wake-ups, outcomes of
// the tasks it submitted, cancellations of tasks it runs, drain requests,
// and notices that a schedule changed. go-redis resubscribes after a
// reconnect; what was published meanwhile is lost, which is why an idle
// server also looks for work every second, pollFutures reads pending
// outcomes every second, a drain request waits in Redis for the
// process's next keep-alive, and the scheduler reads the schedules every
// 5s.
func (q *Queue) listen(msgs <-chan *redis.Message) {
	const (
		done = iota
		cancel
		sched
		wake
		drain
	)
	type route struct{ kind, shard int }
	routes := map[string]route{q.lay.drainChannel(): {kind: drain}}
	for i, l := range q.known() {
		routes[l.doneChannel(q.proc)] = route{done, i}
		routes[l.cancelChannel(q.proc)] = route{cancel, i}
		routes[l.schedulesChannel()] = route{sched, i}
		routes[l.wakeChannel()] = route{wake, i}
	}
	for {
		select {
		case <-q.tasks.Context().Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			r, ok := routes[m.Channel]
			if !ok {
				continue
			}
			switch r.kind {
			case done:
				q.outcomeMessage(m.Payload)
			case cancel:
				q.mu.Lock()
				s := q.server
				q.mu.Unlock()
				if s != nil {
					s.cancelTask(m.Payload)
				}
			case drain:
				q.kickKeepAlive() // it reads this process's request, if any
			case sched:
				if s := q.current(); s != nil {
					s.sched.notify()
				}
			case wake:
				if m.Payload == "pause" {
					// The queue or a tenant was paused: what the server
					// took and has not started goes back.
					if s := q.current(); s != nil {
						s.pauseSeen()
					}
					continue
				}
				q.woken[r.shard].Store(true)
				q.signalWake()
			}
		}
	}
}

func (q *Queue) signalWake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Close stops serving (Server.Stop with ctx), stops the process's loops
// and deregisters it: tasks it still had in flight go back to the queue
// at once. Futures not completed yet fail with ErrClosed (their outcomes
// can still be read with Result). Close is idempotent; calls after it
// fail with ErrClosed. The give-back is bounded by WithCallTimeout, not by
// ctx: when Redis does not answer it, Close's error wraps ErrRedisTimeout
// (not context.DeadlineExceeded), and the tasks go back when the
// process's lease runs out.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	s := q.server
	q.mu.Unlock()
	var errs []error
	if s != nil {
		if err := s.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	q.tasks.Stop()
	q.tasks.Wait()
	q.withdrawals.Close()
	if err := q.withdrawals.WaitContext(ctx); err != nil {
		errs = append(errs, fmt.Errorf("queue: close: failed Submits still being withdrawn: %w", err))
	}
	q.withdrawals.Stop()
	q.withdrawals.Wait()
	if err := q.pubsub.close(); err != nil {
		errs = append(errs, fmt.Errorf("queue: close pub/sub: %w", err))
	}
	// The give-back runs even when ctx ended (it is bounded by the call
	// timeout), and a timeout of it claims no ctx ended (ErrRedisTimeout).
	dctx, cancel := redisutil.CallContext(context.WithoutCancel(ctx), q.cfg.callTimeout)
	defer cancel()
	if _, err := q.giveBack(dctx, true); err != nil {
		errs = append(errs, fmt.Errorf("%w (the process's tasks go back when its lease runs out)", q.redisTimeout(dctx, "close", err)))
	}
	q.mu.Lock()
	futures := q.futures
	q.futures = map[string]*Future{}
	q.mu.Unlock()
	for _, f := range futures {
		f.complete(nil, ErrClosed)
	}
	q.m.close()
	return errors.Join(errs...)
}

func (q *Queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}
