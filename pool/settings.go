package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pool-wide settings act on the whole pool, not on one node: WorkerTTL
// (the janitor judges every worker and node by it), PendingJobTTL (when
// stuck starts are recovered) and MaxQueuedJobs (the bound of the job
// stream). They are stored with the pool (layout.settings) by its first
// full node, so that every process judges by the same values
// (docs/ARCHITECTURE.md, invariants: 12). A node that sets one of them
// explicitly to another value is refused while another full node of the
// pool is live; when none is (the pool is new or dormant), its values
// replace the stored ones. A node that does not set them, and every
// client-only node, adopts the pool's.
const (
	settingWorkerTTL     = "worker_ttl_ms"
	settingPendingJobTTL = "pending_job_ttl_ms"
	settingMaxQueuedJobs = "max_queued_jobs"
)

// Lower bounds of the pool-wide timings. A node keeps alive every
// WorkerTTL/3 and the janitor looks every min(WorkerTTL/4, 250ms): below
// a second, a keep-alive delayed by a busy machine (a GC pause, a loaded
// Redis) gets a healthy worker declared dead. PendingJobTTL bounds Start
// and the claims and records around it.
const (
	MinWorkerTTL     = time.Second
	MinPendingJobTTL = 500 * time.Millisecond
)

// nodeRecord describes a node in the pool's node records, for operators.
type nodeRecord struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Started int64  `json:"started"` // ms, this process's clock
	Client  bool   `json:"client,omitempty"`
}

// settingsScript registers a joining node (its keep-alive and its record)
// and settles the pool-wide settings it will use, in one call, so that
// two nodes joining at once cannot both find the pool dormant.
//
//	KEYS[1] settings, KEYS[2] alive, KEYS[3] node records
//	ARGV[1] node id, ARGV[2] node record (JSON), ARGV[3] "1" for a
//	client-only node, then per setting: name, the node's value, "1" if the
//	node set it explicitly
//
// Returns {"OK", name, value, ...} with the values the node must use, or
// {"MISMATCH", name, stored value, the node's value} when the node set a
// setting explicitly to another value than the pool's while another full
// node is live (nothing is written then).
var settingsScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local client = ARGV[3] == "1"
local stored = {}
local all = redis.call("HGETALL", KEYS[1])
for i = 1, #all, 2 do stored[all[i]] = all[i + 1] end
local ttl = tonumber(stored["` + settingWorkerTTL + `"])
local live = false
if ttl then
  local recs = redis.call("HGETALL", KEYS[3])
  for i = 1, #recs, 2 do
    if recs[i] ~= ARGV[1] and not cjson.decode(recs[i + 1]).client then
      local seen = redis.call("HGET", KEYS[2], "n:" .. recs[i])
      if seen and now - tonumber(seen) <= ttl then live = true end
    end
  end
end
local out = {"OK"}
local write = {}
for i = 4, #ARGV, 3 do
  local name, value, explicit = ARGV[i], ARGV[i + 1], ARGV[i + 2] == "1"
  local use = stored[name]
  if not use then
    use = value
    if not client then write[#write + 1] = name; write[#write + 1] = value end
  elseif explicit and value ~= use and not client then
    if live then return {"MISMATCH", name, use, value} end
    use = value
    write[#write + 1] = name; write[#write + 1] = value
  end
  out[#out + 1] = name; out[#out + 1] = use
end
if #write > 0 then redis.call("HSET", KEYS[1], unpack(write)) end
redis.call("HSET", KEYS[2], "n:" .. ARGV[1], now)
redis.call("HSET", KEYS[3], ARGV[1], ARGV[2])
return out
`)

// settle registers the node and adopts the pool-wide settings (see
// settingsScript), or returns an error wrapping ErrInvalidOption naming
// the setting and both values. It runs when the node joins, before any of
// its goroutines reads the configuration it sets, and again when the node
// rejoins (rejoin true: it was declared dead, or Redis lost the pool),
// when the node keeps its settings: it stores them if the pool lost its
// own, and reports a pool that changed them meanwhile.
func (n *Node) settle(ctx context.Context, rejoin bool) error {
	host, _ := os.Hostname()
	rec, _ := json.Marshal(nodeRecord{Host: host, PID: os.Getpid(), Started: n.started.UnixMilli(), Client: n.cfg.clientOnly})
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	args := []any{n.id, string(rec), flag(n.cfg.clientOnly),
		settingWorkerTTL, n.cfg.workerTTL.Milliseconds(), flag(rejoin || n.cfg.set.workerTTL),
		settingPendingJobTTL, n.cfg.pendingJobTTL.Milliseconds(), flag(rejoin || n.cfg.set.pendingJobTTL),
		settingMaxQueuedJobs, n.cfg.maxQueuedJobs, flag(rejoin || n.cfg.set.maxQueuedJobs),
	}
	res, err := n.run(ctx, settingsScript, "settings", []string{n.lay.settings, n.lay.alive, n.lay.nodes}, args...)
	if err != nil {
		return err
	}
	out, _ := res.([]any)
	if len(out) == 0 {
		return fmt.Errorf("pool: settings: unexpected reply %v", res)
	}
	if out[0] == "MISMATCH" && len(out) == 4 {
		return fmt.Errorf("%w: %s: this node sets %v but the pool uses %v (the pool's settings change only while no other full node is live)",
			ErrInvalidOption, settingName(fmt.Sprint(out[1])), settingValue(fmt.Sprint(out[1]), fmt.Sprint(out[3])), settingValue(fmt.Sprint(out[1]), fmt.Sprint(out[2])))
	}
	s, err := parseSettings(out[1:])
	if err != nil {
		return err
	}
	if rejoin {
		if s != n.settingsOf() { // a client-only node adopts, it does not store
			n.logger.Error("the pool's settings changed while this node was cut off; it keeps its own until it restarts",
				slog.Duration("pool_worker_ttl", s.workerTTL), slog.Duration("worker_ttl", n.cfg.workerTTL))
		}
		return nil
	}
	if s != n.settingsOf() {
		n.logger.Info("using the pool's settings", slog.Duration("worker_ttl", s.workerTTL),
			slog.Duration("pending_job_ttl", s.pendingJobTTL), slog.Int("max_queued_jobs", s.maxQueuedJobs))
	}
	n.cfg.workerTTL, n.cfg.pendingJobTTL, n.cfg.maxQueuedJobs = s.workerTTL, s.pendingJobTTL, s.maxQueuedJobs
	return nil
}

// poolSettings are the values of the pool-wide settings.
type poolSettings struct {
	workerTTL     time.Duration
	pendingJobTTL time.Duration
	maxQueuedJobs int
}

func (n *Node) settingsOf() poolSettings {
	return poolSettings{n.cfg.workerTTL, n.cfg.pendingJobTTL, n.cfg.maxQueuedJobs}
}

// defaultSettings are the settings of a pool that stored none yet.
var defaultSettings = poolSettings{DefaultWorkerTTL, DefaultPendingJobTTL, DefaultMaxQueuedJobs}

// parseSettings reads name/value pairs; missing names keep their
// defaults.
func parseSettings(pairs []any) (poolSettings, error) {
	s := defaultSettings
	for i := 0; i+1 < len(pairs); i += 2 {
		name, raw := fmt.Sprint(pairs[i]), fmt.Sprint(pairs[i+1])
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || v < 1 {
			return s, fmt.Errorf("pool: settings: malformed %s %q", name, raw)
		}
		switch name {
		case settingWorkerTTL:
			s.workerTTL = time.Duration(v) * time.Millisecond
		case settingPendingJobTTL:
			s.pendingJobTTL = time.Duration(v) * time.Millisecond
		case settingMaxQueuedJobs:
			s.maxQueuedJobs = int(v)
		}
	}
	return s, nil
}

// readSettings returns the settings stored with a pool, or the defaults
// when it stored none (no full node joined it yet).
func readSettings(ctx context.Context, rdb redis.UniversalClient, lay layout) (poolSettings, error) {
	m, err := rdb.HGetAll(ctx, lay.settings).Result()
	if err != nil {
		return poolSettings{}, err
	}
	pairs := make([]any, 0, 2*len(m))
	for k, v := range m {
		pairs = append(pairs, k, v)
	}
	return parseSettings(pairs)
}

// settingName returns the option name of a stored setting.
func settingName(name string) string {
	switch name {
	case settingWorkerTTL:
		return "WorkerTTL"
	case settingPendingJobTTL:
		return "PendingJobTTL"
	case settingMaxQueuedJobs:
		return "MaxQueuedJobs"
	}
	return name
}

// settingValue renders a stored value as the option takes it.
func settingValue(name, raw string) string {
	if name == settingMaxQueuedJobs {
		return raw
	}
	ms, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return raw
	}
	return (time.Duration(ms) * time.Millisecond).String()
}
