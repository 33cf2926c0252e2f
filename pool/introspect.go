package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// Stats is a snapshot of a pool, as Stats and Inspect read it from Redis
// (or Summary, see Sampled). Ages are measured with Redis's clock.
type Stats struct {
	Pool string `json:"pool"`
	// Time is Redis's clock when the snapshot was taken.
	Time time.Time `json:"time"`
	// WorkerTTL, PendingJobTTL and MaxQueuedJobs are the pool's settings,
	// as stored with it (the defaults when no full node stored any yet);
	// health is judged by this WorkerTTL.
	WorkerTTL     time.Duration `json:"worker_ttl_ns"`
	PendingJobTTL time.Duration `json:"pending_job_ttl_ns"`
	MaxQueuedJobs int           `json:"max_queued_jobs"`
	// Shards is the pool's shard count (WithShards): the snapshot adds
	// them up.
	Shards int `json:"shards"`
	// Exists is false when Redis holds nothing of the pool (no settings,
	// node, worker or job): a misspelt name, or a pool shut down.
	Exists bool        `json:"exists"`
	Nodes  []NodeStats `json:"nodes"`
	// Workers are sorted by slot (then id; -1 for a worker without one).
	Workers []WorkerStats `json:"workers"`
	// WorkersBusy run at least one job; WorkersIdle run none.
	WorkersBusy int `json:"workers_busy"`
	WorkersIdle int `json:"workers_idle"`
	// Jobs counts every job of the pool; Running those recorded as
	// running (Start succeeded, no stop asked since), including those
	// whose worker just died: see Orphans.
	Jobs    int `json:"jobs"`
	Running int `json:"running"`
	// QueueDepth counts the entries waiting in the pool's job stream, read
	// or not; Pending those a router read but has not acknowledged yet,
	// and OldestPending the age of the oldest of these (0 when none).
	QueueDepth    int64         `json:"queue_depth"`
	Pending       int64         `json:"pending"`
	OldestPending time.Duration `json:"oldest_pending_ns"`
	// Orphans are the jobs handed to a worker that is no longer
	// registered or healthy, sorted: the janitor hands them to another
	// worker within a WorkerTTL; a job listed here for longer is stuck.
	// When Sampled, they are a sample of them (the first few keys of
	// each such worker), and OrphanJobs counts them all.
	Orphans    []string `json:"orphans"`
	OrphanJobs int      `json:"orphan_jobs"`
	// Sampled is false when the job figures were read from every job
	// record (Inspect, Stats, and Summary of a small pool). It is true
	// when Summary read them from the workers' reports, which a worker
	// sends with its keep-alive: then Jobs counts the records (HLEN) but
	// Running, each worker's Jobs and OrphanJobs add up what the workers
	// reported they run (as of their last keep-alive, at most WorkerTTL/3
	// ago for a live worker; jobs still starting are not in them), each
	// worker's Keys are the first few of its keys (reportKeys, 8), and
	// Orphans the first few of each unhealthy worker's that its record
	// still names. Jobs of a worker already removed and not yet
	// recovered (a moment after the janitor reaps it) are not counted.
	Sampled bool `json:"sampled"`
	// Started counts the Starts that succeeded (every attempt counts),
	// StartsFailed those that returned an error or panicked, Recovered the
	// jobs the janitor moved or queued again (their worker gone, or their
	// Start past PendingJobTTL): since the pool was created, across its
	// nodes, until Shutdown; a stale event counts nothing.
	Started      int64 `json:"started"`
	StartsFailed int64 `json:"starts_failed"`
	Recovered    int64 `json:"recovered"`
	// Recoveries are the janitor's most recent walks through the job
	// records that followed a worker's death or recovered a job, newest
	// first, at most 20.
	Recoveries []Recovery `json:"recoveries"`
	// Schedules and Tickers are the pool's schedules (Node.Schedule) and
	// cluster tickers (Node.NewTicker), sorted by name.
	Schedules []ScheduleInfo `json:"schedules"`
	Tickers   []TickerInfo   `json:"tickers"`
}

// NodeStats describes a node of the pool.
type NodeStats struct {
	ID       string    `json:"id"`
	LastSeen time.Time `json:"last_seen"`
	// Age is how long ago LastSeen was, by Redis's clock; Healthy tells
	// whether it is within the pool's WorkerTTL. A node dead for longer
	// is removed by the pool's janitor (while a full node lives).
	Age     time.Duration `json:"age_ns"`
	Healthy bool          `json:"healthy"`
	// Host, PID and Started (the process's clock) identify the node's
	// process, Name is the one WithName gave it; Client tells a
	// client-only node. Empty for a node whose record is missing.
	Host    string    `json:"host,omitempty"`
	PID     int       `json:"pid,omitempty"`
	Name    string    `json:"name,omitempty"`
	Started time.Time `json:"started,omitempty"`
	Client  bool      `json:"client,omitempty"`
}

// WorkerStats describes a worker of the pool.
type WorkerStats struct {
	ID       string    `json:"id"`
	Node     string    `json:"node"`
	Slot     int       `json:"slot"`
	LastSeen time.Time `json:"last_seen"`
	// HealthAge is the age of the worker's last keep-alive; Healthy tells
	// whether it is within WorkerTTL.
	HealthAge time.Duration `json:"health_age_ns"`
	Healthy   bool          `json:"healthy"`
	// Jobs counts the jobs routed to the worker, starting, running or
	// being stopped there; Keys are their keys, sorted. An unhealthy
	// worker's jobs are Orphans too. When Stats.Sampled, Jobs is the
	// count of the jobs the worker reported it runs, and Keys the first
	// few of them.
	Jobs int      `json:"jobs"`
	Keys []string `json:"keys"`
	// RestartingUntil is set for a worker of a node with a stable
	// identity (WithNodeID) that closed for a restart (it is then not
	// Healthy) or stopped keeping alive: its jobs wait for it until then
	// (its node's restart grace), and are not Orphans meanwhile; past it,
	// they move.
	RestartingUntil time.Time `json:"restarting_until,omitzero"`
}

// Stats returns a snapshot of the node's pool, exact: the numbers status
// -exact shows. It costs one pipelined round trip that reads every job
// record: O(jobs), 0.3-1 s at 100,000 jobs; Summary is the cheap one for
// views. It is safe for concurrent use.
func (n *Node) Stats(ctx context.Context) (*Stats, error) {
	if err := n.errClosed(); err != nil {
		return nil, err
	}
	return inspectShards(ctx, n.rdb, n.name, n.layouts())
}

// Inspect returns a snapshot of the pool poolName without joining it: it
// only reads Redis, so it works on a pool whose nodes all crashed. Health
// is judged by the WorkerTTL stored with the pool. A pool Redis holds
// nothing of is no error: Stats.Exists is false. It costs what Stats
// costs (O(jobs)); Summary reads a large pool without its job records.
func Inspect(ctx context.Context, rdb redis.UniversalClient, poolName string) (*Stats, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return nil, err
	}
	lays, err := shardLayouts(ctx, rdb, poolName, lay)
	if err != nil {
		return nil, fmt.Errorf("pool: stats of %q: %w", poolName, err)
	}
	return inspectShards(ctx, rdb, poolName, lays)
}

func inspect(ctx context.Context, rdb redis.UniversalClient, poolName string, lay layout) (*Stats, error) {
	return readPool(ctx, rdb, poolName, lay, true)
}

// readPool reads a snapshot of the pool: with exact, the job figures
// from every job record (inspect); without, from the workers' reports
// (summary).
func readPool(ctx context.Context, rdb redis.UniversalClient, poolName string, lay layout, exact bool) (*Stats, error) {
	pipe := rdb.Pipeline()
	timeCmd := pipe.Time(ctx)
	settingsCmd := pipe.HGetAll(ctx, lay.settings)
	nodesCmd := pipe.HGetAll(ctx, lay.nodes)
	workersCmd := pipe.HGetAll(ctx, lay.workers)
	slotsCmd := pipe.HGetAll(ctx, lay.slots)
	aliveCmd := pipe.HGetAll(ctx, lay.alive)
	var jobsCmd redis.Cmder
	if exact {
		jobsCmd = pipe.HGetAll(ctx, lay.jobs)
	} else {
		jobsCmd = pipe.HLen(ctx, lay.jobs)
	}
	depthCmd := pipe.XLen(ctx, lay.jobStream)
	pendingCmd := pipe.XPending(ctx, lay.jobStream, routerGroup)
	countersCmd := pipe.HGetAll(ctx, lay.counters)
	recoveryCmd := pipe.LRange(ctx, lay.recovery, 0, maxRecoveries-1)
	_, _ = pipe.Exec(ctx) // each command's error is checked below
	for _, c := range []redis.Cmder{timeCmd, settingsCmd, nodesCmd, workersCmd, slotsCmd, aliveCmd, jobsCmd, depthCmd, pendingCmd, countersCmd, recoveryCmd} {
		if err := c.Err(); err != nil && !(c == pendingCmd && isNoGroup(err)) {
			return nil, fmt.Errorf("pool: stats of %q: %w", poolName, err)
		}
	}
	now := timeCmd.Val()
	pairs := []any{}
	for k, v := range settingsCmd.Val() {
		pairs = append(pairs, k, v)
	}
	set, err := parseSettings(pairs)
	if err != nil {
		return nil, fmt.Errorf("pool: stats of %q: %w", poolName, err)
	}
	ttl := set.workerTTL
	st := &Stats{Pool: poolName, Time: now, QueueDepth: depthCmd.Val(), Sampled: !exact,
		WorkerTTL: set.workerTTL, PendingJobTTL: set.pendingJobTTL, MaxQueuedJobs: set.maxQueuedJobs,
		Nodes: []NodeStats{}, Workers: []WorkerStats{}, Orphans: []string{}}
	var records map[string]string
	if c, ok := jobsCmd.(*redis.MapStringStringCmd); ok {
		records = c.Val()
		st.Jobs = len(records)
	} else {
		st.Jobs = int(jobsCmd.(*redis.IntCmd).Val())
	}
	st.Exists = len(settingsCmd.Val())+len(nodesCmd.Val())+len(workersCmd.Val())+len(aliveCmd.Val())+st.Jobs > 0
	counters := countersCmd.Val()
	for name, field := range map[string]*int64{counterStarted: &st.Started, counterStartsFailed: &st.StartsFailed, counterRecovered: &st.Recovered} {
		if raw, ok := counters[name]; ok {
			if *field, err = strconv.ParseInt(raw, 10, 64); err != nil {
				return nil, fmt.Errorf("pool: stats of %q: counter %s: %w", poolName, name, err)
			}
		}
	}
	if st.Recoveries, err = parseRecoveries(recoveryCmd.Val()); err != nil {
		return nil, fmt.Errorf("pool: stats of %q: %w", poolName, err)
	}
	if p, err := pendingCmd.Result(); err == nil && p.Count > 0 {
		st.Pending = p.Count
		if ms, ok := streamIDMs(p.Lower); ok {
			st.OldestPending = max(0, now.Sub(time.UnixMilli(ms)))
		}
	}

	alive := aliveCmd.Val()
	seen := func(field string) (time.Time, bool) {
		ms, err := strconv.ParseInt(alive[field], 10, 64)
		return time.UnixMilli(ms), err == nil
	}
	nodeRecords := nodesCmd.Val()
	listed := map[string]bool{}
	for field := range alive {
		if id, ok := strings.CutPrefix(field, "n:"); ok {
			listed[id] = true
			t, _ := seen(field)
			ns := NodeStats{ID: id, LastSeen: t, Age: now.Sub(t)}
			ns.Healthy = ns.Age <= ttl
			st.Nodes = append(st.Nodes, ns)
		}
	}
	for id := range nodeRecords {
		if !listed[id] { // a record without keep-alive: dead
			st.Nodes = append(st.Nodes, NodeStats{ID: id})
		}
	}
	for i := range st.Nodes {
		ns := &st.Nodes[i]
		var rec nodeRecord
		if raw, ok := nodeRecords[ns.ID]; ok && json.Unmarshal([]byte(raw), &rec) == nil {
			ns.Host, ns.PID, ns.Name, ns.Client = rec.Host, rec.PID, rec.Name, rec.Client
			ns.Started = time.UnixMilli(rec.Started)
		}
	}
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].ID < st.Nodes[j].ID })

	healthy := map[string]bool{}
	slotOf := map[string]int{}
	for k, v := range slotsCmd.Val() {
		if i, err := strconv.Atoi(k); err == nil {
			slotOf[v] = i
		}
	}
	for id, raw := range workersCmd.Val() {
		var info workerInfo
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			return nil, fmt.Errorf("pool: stats of %q: worker %s: %w", poolName, id, err)
		}
		ws := WorkerStats{ID: id, Node: info.Node, Slot: -1, Keys: []string{}}
		if s, ok := slotOf[id]; ok {
			ws.Slot = s
		}
		if t, ok := seen("w:" + id); ok {
			ws.LastSeen, ws.HealthAge = t, now.Sub(t)
			ws.Healthy = ws.HealthAge <= ttl
		}
		if parked, ok := seen("r:" + id); ok && parked.After(now) {
			// Closed for a restart (WithNodeID): it runs nothing, however
			// recent its last keep-alive.
			ws.RestartingUntil, ws.Healthy = parked, false
		} else if !ws.Healthy && info.Grace > 0 && !ws.LastSeen.IsZero() {
			// Stopped keeping alive (a crash): the janitor waits for it
			// WorkerTTL + the grace.
			if until := ws.LastSeen.Add(ttl + time.Duration(info.Grace)*time.Millisecond); until.After(now) {
				ws.RestartingUntil = until
			}
		}
		healthy[id] = ws.Healthy || !ws.RestartingUntil.IsZero()
		st.Workers = append(st.Workers, ws)
	}

	if exact {
		err = countRecords(st, records, healthy)
	} else {
		err = countReports(ctx, rdb, lay, st, alive, healthy)
	}
	if err != nil {
		return nil, fmt.Errorf("pool: stats of %q: %w", poolName, err)
	}
	for _, ws := range st.Workers {
		if ws.Jobs > 0 {
			st.WorkersBusy++
		} else {
			st.WorkersIdle++
		}
	}
	sort.Slice(st.Workers, func(i, j int) bool {
		a, b := st.Workers[i], st.Workers[j]
		if a.Slot != b.Slot {
			return a.Slot < b.Slot
		}
		return a.ID < b.ID
	})
	if st.Schedules, st.Tickers, err = readSchedules(ctx, rdb, lay, now); err != nil {
		return nil, fmt.Errorf("pool: stats of %q: %w", poolName, err)
	}
	return st, nil
}

// streamIDMs returns the milliseconds part of a stream entry id.
func streamIDMs(id string) (int64, bool) {
	ms, _, _ := strings.Cut(id, "-")
	v, err := strconv.ParseInt(ms, 10, 64)
	return v, err == nil
}

// Exists reports whether Redis holds anything of the pool poolName: its
// settings, a node, a worker, a job or a queued event. A pool that was
// shut down, or never joined, does not exist; a name with a typo neither.
// It costs one EXISTS. It returns an error wrapping ErrInvalidOption for
// a nil client or an invalid name.
func Exists(ctx context.Context, rdb redis.UniversalClient, poolName string) (bool, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return false, err
	}
	n, err := rdb.Exists(ctx, lay.settings, lay.nodes, lay.alive, lay.workers, lay.jobs, lay.jobStream).Result()
	if err != nil {
		return false, fmt.Errorf("pool: exists %q: %w", poolName, err)
	}
	return n > 0, nil
}

// JobKeys returns the keys of every job in the pool, whatever its state
// (queued, starting, running or being moved), sorted. It reads Redis.
func (n *Node) JobKeys(ctx context.Context) ([]string, error) {
	if err := n.errClosed(); err != nil {
		return nil, err
	}
	var all []string
	for _, p := range n.partsOrSelf() {
		ks, err := jobKeys(ctx, n.rdb, p.lay)
		if err != nil {
			return nil, err
		}
		all = append(all, ks...)
	}
	sort.Strings(all)
	return all, nil
}

// JobKeys returns the keys of every job of pool poolName, as Node.JobKeys
// does, without joining the pool: one HKEYS, O(jobs), sorted. It returns
// an error wrapping ErrInvalidOption for a nil client or an invalid name;
// a pool Redis holds nothing of has no keys.
func JobKeys(ctx context.Context, rdb redis.UniversalClient, poolName string) ([]string, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return nil, err
	}
	lays, err := shardLayouts(ctx, rdb, poolName, lay)
	if err != nil {
		return nil, fmt.Errorf("pool: job keys: %w", err)
	}
	var all []string
	for _, l := range lays {
		ks, err := jobKeys(ctx, rdb, l)
		if err != nil {
			return nil, err
		}
		all = append(all, ks...)
	}
	sort.Strings(all)
	return all, nil
}

func jobKeys(ctx context.Context, rdb redis.UniversalClient, lay layout) ([]string, error) {
	keys, err := rdb.HKeys(ctx, lay.jobs).Result()
	if err != nil {
		return nil, fmt.Errorf("pool: job keys: %w", err)
	}
	sort.Strings(keys)
	return keys, nil
}

// LiveWorkers returns how many workers of the pool are live: registered,
// with a keep-alive within the pool's WorkerTTL by Redis's clock. Unlike
// Stats it does not read the job records: it costs O(workers). A
// DispatchJob into a pool without live workers waits until one joins.
func (n *Node) LiveWorkers(ctx context.Context) (int, error) {
	if err := n.errClosed(); err != nil {
		return 0, err
	}
	res, err := n.run(ctx, liveWorkersScript, "live workers", []string{n.lay.alive, n.lay.workers}, n.cfg.workerTTL.Milliseconds())
	if err != nil {
		return 0, err
	}
	c, _ := res.(int64)
	return int(c), nil
}

// liveWorkersScript counts the workers whose keep-alive is within the TTL,
// by Redis's clock.
//
//	KEYS[1] alive, KEYS[2] workers map
//	ARGV[1] worker TTL in ms
var liveWorkersScript = redis.NewScript(member.Lua + `
local now = now_ms()
local n = 0
for _, id in ipairs(redis.call("HKEYS", KEYS[2])) do
  if not lapsed(redis.call("HGET", KEYS[1], "w:" .. id), now, ARGV[1]) then n = n + 1 end
end
return n
`)
