package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/internal/group"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Server runs this process's workers for a queue: made by Serve or
// ServeWith, ended by Stop or Halt (or the Queue's Close).
//
// One goroutine (feed) talks to Redis for the workers: it records the
// attempts' ends and takes tasks in the same script call, up to the
// workers with an open resource plus the prefetch (or what it takes
// ahead on its own: aheadDepth), and puts them in ready, where the
// first idle worker picks each up.
type Server struct {
	q        *Queue
	cfg      serveConfig
	workers  []*worker
	ready    chan *Task    // taken, not started; capacity workers + prefetch + aheadMax
	aheadMax int           // most tasks taken ahead on its own (0: WithPrefetch, or a limit)
	picked   atomic.Int64  // when a worker last picked a task from ready (unix ns)
	avail    atomic.Int64  // workers with an open resource
	availed  chan struct{} // capacity 1: avail grew
	loops    *group.Group  // the workers
	hard     context.Context
	halt     context.CancelFunc // cancels every handler's ctx
	stopping chan struct{}      // closed when Stop begins: no more takes
	stopOnce sync.Once
	busy     atomic.Int64
	drops    atomic.Int64    // attempts that counted as drops for lim
	outcomes chan outcomeReq // to feed; closed once the workers returned
	fed      chan struct{}   // closed when feed returned
	// feedCtx is feed's ctx (feeder.ctx): Stop cancels it (giveUp) when
	// Redis has not taken the last ends a call timeout after Stop's ctx
	// ended.
	feedCtx  context.Context
	giveUp   context.CancelFunc
	endOnce  sync.Once
	lim      *Limit        // nil without a concurrency limit
	part     *limitPart    // the server's partition of lim
	mode     atomic.Int32  // Mode
	modeSet  chan struct{} // capacity 1: the mode changed
	paused   chan struct{} // capacity 1: the queue or a tenant was paused (pauseSeen)
	done     chan struct{} // closed when Stop has finished
	doneOnce sync.Once
	serial   int64      // this process's servers are numbered from 1 (Client.Drain names one)
	sched    *scheduler // enqueues the schedules' ticks (scheduler.go)
	took     durations  // recent handler run times, for the keep-alive's percentiles

	mu      sync.Mutex
	running map[string]*run         // by task id, from hand-out to outcome
	dropped map[int][]string        // per shard: ids of the ends feed gave up (drop)
	early   map[string]time.Time    // cancels of tasks not handed out yet, by task id → when (see cancelTask)
	suspect map[int]map[string]bool // per shard: in the inflight set but not running, last check
}

// run is one attempt in progress.
type run struct {
	cancel    context.CancelFunc
	lost      atomic.Bool // the process was declared dead: do not record it
	cancelled atomic.Bool // Cancel asked for it
	finished  atomic.Bool // the handler returned; its outcome is being recorded
	shard     int         // the shard its task was taken from
}

// Serve runs this process's workers for the queue with handler h, until
// Stop, Halt or the Queue's Close. Workers without a resource; see
// ServeWith. Errors: ErrInvalidOption, ErrAlreadyServing, ErrClosed.
func (q *Queue) Serve(h Handler, opts ...ServeOption) (*Server, error) {
	if h == nil {
		return nil, invalid("nil handler")
	}
	return ServeWith(q, Resource[struct{}]{}, func(ctx context.Context, _ struct{}, t *Task) ([]byte, error) {
		return h(ctx, t)
	}, opts...)
}

// ServeWith is Serve with a resource owned by each worker (a connection,
// a browser, a GPU): see Resource.
func ServeWith[R any](q *Queue, res Resource[R], h ResourceHandler[R], opts ...ServeOption) (*Server, error) {
	if q == nil {
		return nil, invalid("nil queue")
	}
	if h == nil {
		return nil, invalid("nil handler")
	}
	cfg := defaultServeConfig()
	for _, o := range opts {
		if o == nil {
			return nil, invalid("nil serve option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	lim, part, err := cfg.newLimit()
	if err != nil {
		return nil, err
	}
	aheadMax := 0
	if !cfg.prefetchSet && lim == nil {
		aheadMax = min(aheadPerWorker*cfg.workers, MaxPrefetch)
	}
	s := &Server{
		q:        q,
		cfg:      cfg,
		aheadMax: aheadMax,
		ready:    make(chan *Task, cfg.workers+cfg.prefetch+aheadMax),
		availed:  make(chan struct{}, 1),
		loops:    group.New(context.Background()),
		stopping: make(chan struct{}),
		running:  make(map[string]*run),
		dropped:  make(map[int][]string),
		suspect:  make(map[int]map[string]bool),
		outcomes: make(chan outcomeReq, 4*cfg.workers+cfg.prefetch+aheadMax),
		fed:      make(chan struct{}),
		modeSet:  make(chan struct{}, 1),
		paused:   make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	s.feedCtx, s.giveUp = context.WithCancel(q.tasks.Context())
	// Made before the server is published (q.server): the listener
	// notifies it as soon as it finds the server.
	s.sched = newScheduler(q)
	s.lim, s.part = lim, part
	s.mode.Store(int32(cfg.mode))
	s.hard, s.halt = context.WithCancel(context.Background())
	for i := 0; i < cfg.workers; i++ {
		s.workers = append(s.workers, &worker{
			idx:  i,
			slot: &resourceSlot[R]{idx: i, res: res, h: h},
		})
	}
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return nil, ErrClosed
	case q.server != nil:
		q.mu.Unlock()
		return nil, ErrAlreadyServing
	}
	q.serials++
	s.serial = q.serials
	q.server = s
	q.mu.Unlock()
	go s.feed() // owned by the server: Stop closes its input and waits for it
	s.sched.start()
	for _, w := range s.workers {
		s.loops.Go(func() { s.work(w) })
	}
	q.kickKeepAlive() // publish the worker count and mode (Client.Drain finds the server by them)
	return s, nil
}

func (s *Server) size() int { return len(s.workers) }

// Limit returns the number of tasks the server may run at once: its
// concurrency limit (WithConcurrencyLimit, or WithLimit's shared one),
// at most its workers; without a limit, its workers.
func (s *Server) Limit() int {
	if s.lim == nil {
		return len(s.workers)
	}
	return min(s.lim.Limit(), len(s.workers))
}

// Drops returns the attempts of this server that counted as drops for
// its concurrency limit (RetryLater, timeouts), 0 without a limit.
func (s *Server) Drops() int64 { return s.drops.Load() }

func (s *Server) busyCount() int { return int(s.busy.Load()) }
func (s *Server) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// Stop stops taking tasks and waits for those in flight to finish, until
// ctx ends; then it cancels their ctx (a hard stop, as Halt), and the
// tasks that do not succeed go back to the queue at once without using
// an attempt, as do the tasks taken ahead (WithPrefetch) not started. It returns when every worker has returned and closed its
// resource, and the ends of their attempts are recorded: ctx's error if
// it had to cancel tasks, else nil. While Redis (or the shard of some of
// those tasks) does not take their ends, it waits until ctx ends and
// WithCallTimeout more, then gives the ends up: those tasks go back to
// the queue, to run again. Stop is idempotent; the Queue can Serve again
// afterwards.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.sched.stop()
	s.loops.Close()
	err := s.loops.WaitContext(ctx)
	if err != nil {
		s.halt()
		s.loops.Wait()
	}
	s.halt()
	s.endOnce.Do(func() { close(s.outcomes) })
	s.awaitFed(ctx)
	s.giveUp() // feed returned: this only releases feedCtx
	// Nothing runs now: what is still marked in flight (an outcome that
	// could not be recorded, a dequeue whose reply was lost) goes back.
	gctx, cancel := redisutil.CallContext(context.WithoutCancel(ctx), s.q.cfg.callTimeout)
	if n, gerr := s.q.giveBack(gctx, false); gerr != nil {
		s.mu.Lock()
		dropped := s.dropped
		s.dropped = make(map[int][]string)
		s.mu.Unlock()
		s.q.owe(dropped)
		s.q.logger.Warn("giving back unfinished tasks failed; the keep-alive gives back those whose ends were given up, the others go back when this process closes or its lease runs out", "error", s.q.redisTimeout(gctx, "stop", gerr))
	} else if n > 0 {
		s.q.logger.Info("gave back unfinished tasks", "tasks", n)
	}
	cancel()
	s.q.mu.Lock()
	if s.q.server == s {
		s.q.server = nil
	}
	s.q.mu.Unlock()
	s.q.kickKeepAlive()
	s.doneOnce.Do(func() { close(s.done) })
	return err
}

// awaitFed waits for feed to record the last ends. While Redis does not
// take them (it, or their shard, is down), it waits until ctx ends and a
// call timeout more (so that Halt, whose ctx is done, still records
// them), then gives them up: their tasks go back to the queue from
// Redis (giveBack, the deregistration at Close, or the process's lease
// running out), to run again.
func (s *Server) awaitFed(ctx context.Context) {
	select {
	case <-s.fed:
		return
	case <-ctx.Done():
	}
	grace := time.NewTimer(s.q.cfg.callTimeout)
	defer grace.Stop()
	select {
	case <-s.fed:
	case <-grace.C:
		s.q.logger.Warn("giving up recording the ends of attempts: Redis does not take them; their tasks run again")
		s.giveUp()
		<-s.fed
	}
}

// pauseSeen tells the feed that the queue or a tenant was paused: it
// gives back the tasks it took and no worker has started (releaseWaiting),
// so that none of them starts during the pause.
func (s *Server) pauseSeen() {
	select {
	case s.paused <- struct{}{}:
	default:
	}
}

// Done is closed when the server has stopped: drained (ModeDrain), by
// Stop or Halt, or by the Queue's Close.
func (s *Server) Done() <-chan struct{} { return s.done }

// Halt is a hard stop: it cancels the ctx of every task in flight at once
// and returns when the workers have returned; see Stop.
func (s *Server) Halt() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Stop(ctx)
}
