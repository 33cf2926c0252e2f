package dashboard

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// Listing is every pool and queue of a Redis at a glance: the overview
// page, its JSON twin, and the pools command.
type Listing struct {
	Time   time.Time  `json:"time"`
	Pools  []PoolRow  `json:"pools"`
	Queues []QueueRow `json:"queues"`
}

// PoolRow is a pool at a glance.
type PoolRow struct {
	Name           string `json:"name"`
	Nodes          int    `json:"nodes"`
	NodesHealthy   int    `json:"nodes_healthy"`
	Workers        int    `json:"workers"`
	WorkersHealthy int    `json:"workers_healthy"`
	Jobs           int    `json:"jobs"`
	Running        int    `json:"running"`
	Queued         int64  `json:"queued"`
	Orphans        int    `json:"orphans"`
	// Health is "ok", "warn" (a dead worker or node, jobs without a live
	// owner, events pending for longer than PendingJobTTL) or "bad" (jobs
	// and no live worker), with Problem saying why; "error" when the pool
	// could not be read (Error).
	Health  string `json:"health"`
	Problem string `json:"problem,omitempty"`
	Error   string `json:"error,omitempty"`
}

// QueueRow is a queue at a glance.
type QueueRow struct {
	Name      string `json:"name"`
	Processes int    `json:"processes"` // those that serve
	Clients   int    `json:"clients"`   // those that only submit (queue.ProcessInfo.SubmitOnly)
	Workers   int64  `json:"workers"`
	Busy      int64  `json:"busy"`
	Available int64  `json:"available"`
	Delayed   int64  `json:"delayed"`
	Retrying  int64  `json:"retrying"`
	InFlight  int64  `json:"in_flight"`
	Dead      int64  `json:"dead"`
	Health    string `json:"health"` // as PoolRow's: "bad" is tasks waiting and no worker
	Problem   string `json:"problem,omitempty"`
	Error     string `json:"error,omitempty"`
}

// List lists the pools and queues of rdb with their health: the
// dashboard's overview as data (its JSON twin is this Listing). A pool or
// a queue that cannot be read is listed with its Error. It SCANs the whole
// keyspace (every master of a Cluster), so it costs O(keys in Redis), and
// it needs a *redis.Client or a *redis.ClusterClient. Each pool is read
// with pool.Summary: a pool of many jobs costs what a small one does.
func List(ctx context.Context, rdb redis.UniversalClient) (*Listing, error) {
	pools, queues, err := Names(ctx, rdb)
	if err != nil {
		return nil, err
	}
	l := &Listing{Time: time.Now(), Pools: []PoolRow{}, Queues: []QueueRow{}}
	for _, name := range pools {
		st, err := pool.Summary(ctx, rdb, name)
		if err != nil {
			l.Pools = append(l.Pools, PoolRow{Name: name, Health: "error", Error: err.Error()})
			continue
		}
		if st.Exists {
			l.Pools = append(l.Pools, summarizePool(st))
		}
	}
	for _, name := range queues {
		row := QueueRow{Name: name}
		c, err := queue.NewClient(rdb, name)
		var st queue.Stats
		if err == nil {
			st, err = c.Stats(ctx)
		}
		if err != nil {
			row.Health, row.Error = "error", err.Error()
		} else {
			row = summarizeQueue(name, st)
		}
		l.Queues = append(l.Queues, row)
	}
	return l, nil
}

func (s *Handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readCtx(r)
	defer cancel()
	l, err := List(ctx, s.rdb)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	s.render(w, r, "overview", page{Title: "shepherd", Live: true, View: l})
}

// summarizePool judges a pool's health from a snapshot.
func summarizePool(st *pool.Stats) PoolRow {
	row := PoolRow{Name: st.Pool, Nodes: len(st.Nodes), Workers: len(st.Workers), Jobs: st.Jobs,
		Running: st.Running, Queued: st.QueueDepth, Orphans: st.OrphanJobs, Health: "ok"}
	for _, n := range st.Nodes {
		if n.Healthy {
			row.NodesHealthy++
		}
	}
	for _, w := range st.Workers {
		if w.Healthy {
			row.WorkersHealthy++
		}
	}
	switch {
	case row.WorkersHealthy == 0 && (st.Jobs > 0 || st.QueueDepth > 0):
		row.Health, row.Problem = "bad", "jobs but no live worker"
	case st.OrphanJobs > 0:
		row.Health, row.Problem = "warn", "jobs without a live owner"
	case st.OldestPending > st.PendingJobTTL:
		row.Health, row.Problem = "warn", "a job event pending for longer than PendingJobTTL"
	case row.WorkersHealthy < row.Workers || row.NodesHealthy < row.Nodes:
		row.Health, row.Problem = "warn", "a dead worker or node"
	}
	return row
}

// summarizeQueue judges a queue's health from its stats.
func summarizeQueue(name string, st queue.Stats) QueueRow {
	row := QueueRow{Name: name, Workers: st.Workers, Busy: st.Busy,
		Available: st.Available, Delayed: st.Delayed, Retrying: st.Retrying, InFlight: st.InFlight, Dead: st.Dead, Health: "ok"}
	for _, p := range st.Processes {
		if p.SubmitOnly() {
			row.Clients++
		} else {
			row.Processes++
		}
	}
	switch {
	case st.Workers == 0 && st.Available > 0:
		row.Health, row.Problem = "bad", "tasks waiting and no worker"
	case st.Paused:
		row.Health, row.Problem = "warn", "paused: no task starts"
	case st.Dead > 0:
		row.Health, row.Problem = "warn", "dead letters"
	}
	return row
}

// poolView is a pool's page.
type poolView struct {
	Stats *pool.Stats `json:"stats"`
	// History is the pool's samples of the last hour, oldest first, read
	// from Redis (pool.History), and StepMS their spacing.
	History []poolHistoryPoint `json:"history"`
	Step    time.Duration      `json:"step"`
	Charts  poolCharts         `json:"-"`
	// NodeNames are the nodes' labels for people (procLabel), by id.
	NodeNames map[string]string `json:"-"`
	// MostJobs is the most jobs of a worker: the full width of the bars.
	MostJobs int64   `json:"-"`
	Summary  PoolRow `json:"summary"`
}

func (s *Handler) poolPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("pool")
	ctx, cancel := readCtx(r)
	defer cancel()
	st, ok := s.inspectPool(ctx, w, r, name)
	if !ok {
		return
	}
	hist, err := pool.History(ctx, s.rdb, name, poolBuckets)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	v := poolView{Stats: st, Summary: summarizePool(st), Step: pool.HistoryStep, History: make([]poolHistoryPoint, 0, len(hist)),
		Charts: newPoolCharts(hist, st.Time, plotWidth(r.URL.Query().Get("cw")))}
	for _, h := range hist {
		v.History = append(v.History, poolHistoryPoint(h))
	}
	v.NodeNames = make(map[string]string, len(st.Nodes))
	for _, n := range st.Nodes {
		v.NodeNames[n.ID] = procLabel(n.ID, n.Name, n.Host, n.PID)
	}
	for _, ws := range st.Workers {
		v.MostJobs = max(v.MostJobs, int64(ws.Jobs))
	}
	s.render(w, r, "pool", page{Title: "pool " + name, Live: true, View: v,
		Crumbs: []crumb{{"pool " + name, ""}}})
}

// inspectPool reads a pool for a page, with pool.Summary (cheap whatever
// the pool's size); it answers 404 for a pool Redis holds nothing of, and
// 400 for a name no pool can have.
func (s *Handler) inspectPool(ctx context.Context, w http.ResponseWriter, r *http.Request, name string) (*pool.Stats, bool) {
	st, err := pool.Summary(ctx, s.rdb, name)
	switch {
	case errors.Is(err, pool.ErrInvalidOption):
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return nil, false
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return nil, false
	case !st.Exists:
		s.fail(w, r, http.StatusNotFound, "pool "+quote(name)+" not found: Redis holds nothing of it")
		return nil, false
	}
	return st, true
}

// findJob sends the pool page's key search to the job's page.
func (s *Handler) findJob(w http.ResponseWriter, r *http.Request) {
	to := s.links.pool(r.PathValue("pool"))
	if key := r.URL.Query().Get("key"); key != "" {
		to = s.links.job(r.PathValue("pool"), key)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// jobView is a job's page.
type jobView struct {
	Job     *pool.JobInfo  `json:"job"`
	Preview payloadPreview `json:"-"`
	Age     time.Duration  `json:"-"` // since Created
	InState time.Duration  `json:"-"` // since Changed
}

func (s *Handler) jobPage(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("pool"), r.PathValue("key")
	ctx, cancel := readCtx(r)
	defer cancel()
	job, err := pool.InspectJob(ctx, s.rdb, name, key)
	switch {
	case errors.Is(err, pool.ErrJobNotFound):
		if _, ok := s.inspectPool(ctx, w, r, name); ok {
			s.fail(w, r, http.StatusNotFound, "job "+quote(key)+" not found in pool "+quote(name)+": never dispatched, stopped, or its Start failed")
		}
		return
	case errors.Is(err, pool.ErrInvalidKey), errors.Is(err, pool.ErrInvalidOption):
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	v := jobView{Job: job, Preview: preview(job.Payload), Age: job.Time.Sub(job.Created), InState: job.Time.Sub(job.Changed)}
	s.render(w, r, "job", page{Title: "job " + key, Live: true, View: v,
		Crumbs: []crumb{{"pool " + name, s.links.pool(name)}, {"job " + key, ""}}})
}

// stopJob stops a job, through a client-only node that joins for it.
func (s *Handler) stopJob(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("pool"), r.PostFormValue("key")
	if key == "" {
		s.fail(w, r, http.StatusBadRequest, "no job key given")
		return
	}
	if !s.confirmed(w, r, "Stop job "+quote(key)+" of pool "+quote(name)+"? Its worker's Stop runs and the job is deleted.") {
		return
	}
	err := s.withNode(r, name, func(ctx context.Context, n *pool.Node) error { return n.StopJob(ctx, key) })
	if s.actionFailed(w, r, "stop job", err) {
		return
	}
	s.logger.Info("dashboard: job stopped", "pool", name, "key", key)
	http.Redirect(w, r, s.links.pool(name)+"?done=stopped", http.StatusSeeOther)
}

// shutdownPool shuts a pool down: every job stops and the pool is deleted.
func (s *Handler) shutdownPool(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("pool")
	if !s.confirmed(w, r, "Shut pool "+quote(name)+" down? Every job on every node stops, and the pool is deleted from Redis.") {
		return
	}
	err := s.withNode(r, name, func(ctx context.Context, n *pool.Node) error { return n.Shutdown(ctx) })
	if s.actionFailed(w, r, "shut down", err) {
		return
	}
	s.logger.Info("dashboard: pool shut down", "pool", name)
	http.Redirect(w, r, s.links.root()+"?done=shutdown", http.StatusSeeOther)
}

// withNode joins an existing pool as a client-only node for one action.
func (s *Handler) withNode(r *http.Request, name string, f func(ctx context.Context, n *pool.Node) error) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.actionTimeout)
	defer cancel()
	exists, err := pool.Exists(ctx, s.rdb, name)
	if err != nil {
		return err
	}
	if !exists {
		return errNotFound{"pool " + quote(name) + " not found"}
	}
	n, err := pool.AddNode(ctx, s.rdb, name, pool.WithClientOnly(), pool.WithLogger(s.logger))
	if err != nil {
		return err
	}
	err = f(ctx, n)
	if cerr := n.Close(context.WithoutCancel(ctx)); cerr != nil && !errors.Is(cerr, pool.ErrPoolShutdown) {
		err = errors.Join(err, cerr)
	}
	return err
}
