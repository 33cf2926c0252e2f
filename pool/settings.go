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
	"github.com/shepherd-go/shepherd/internal/member"
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

// MinWorkerTTL and MinPendingJobTTL (options.go) bound the pool-wide
// timings from below. A node keeps alive every WorkerTTL/3 and the janitor
// looks every min(WorkerTTL/4, 250ms): below a second, a keep-alive
// delayed by a busy machine gets a healthy worker declared dead.
// PendingJobTTL bounds Start and the claims and records around it.

// nodeRecord describes a node in the pool's node records, for operators.
type nodeRecord struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Name    string `json:"name,omitempty"` // WithName's
	Started int64  `json:"started"`        // ms, this process's clock
	Client  bool   `json:"client,omitempty"`
}

// settingsScript registers a joining node (its keep-alive and its record)
// and settles the pool-wide settings it will use (member.Setting's rule,
// the settle_settings Lua helper), in one call, so that two nodes joining at once
// cannot both find the pool dormant. A full node is live while its
// keep-alive is within the stored WorkerTTL; a client-only node adopts
// and writes nothing.
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
var settingsScript = redis.NewScript(member.Lua + `
local now = now_ms()
local client = ARGV[3] == "1"
local ttl = tonumber(redis.call("HGET", KEYS[1], "` + settingWorkerTTL + `"))
local live = false
if ttl then
  local recs = redis.call("HGETALL", KEYS[3])
  for i = 1, #recs, 2 do
    if recs[i] ~= ARGV[1] and not cjson.decode(recs[i + 1]).client
      and not lapsed(redis.call("HGET", KEYS[2], "n:" .. recs[i]), now, ttl) then
      live = true
    end
  end
end
local out = settle_settings(KEYS[1], live, client, 4)
if out[1] ~= "OK" then return out end
seen(KEYS[2], "n:" .. ARGV[1], now)
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
	rec, _ := json.Marshal(nodeRecord{Host: host, PID: os.Getpid(), Name: n.cfg.name, Started: n.started.UnixMilli(), Client: n.cfg.clientOnly})
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	args := member.SettleArgs([]any{n.id, string(rec), flag(n.cfg.clientOnly)},
		member.Setting{Name: settingWorkerTTL, Value: strconv.FormatInt(n.cfg.workerTTL.Milliseconds(), 10), Explicit: rejoin || n.cfg.set.workerTTL},
		member.Setting{Name: settingPendingJobTTL, Value: strconv.FormatInt(n.cfg.pendingJobTTL.Milliseconds(), 10), Explicit: rejoin || n.cfg.set.pendingJobTTL},
		member.Setting{Name: settingMaxQueuedJobs, Value: strconv.Itoa(n.cfg.maxQueuedJobs), Explicit: rejoin || n.cfg.set.maxQueuedJobs},
	)
	res, err := n.run(ctx, settingsScript, "settings", []string{n.lay.settings, n.lay.alive, n.lay.nodes}, args...)
	if err != nil {
		return err
	}
	out, _ := res.([]any)
	use, mm, err := member.Settled(out)
	if err != nil {
		return fmt.Errorf("pool: settings: %w", err)
	}
	if mm != nil {
		return fmt.Errorf("%w: %s: this node sets %v but the pool uses %v (the pool's settings change only while no other full node is live)",
			ErrInvalidOption, settingName(mm.Name), settingValue(mm.Name, mm.Mine), settingValue(mm.Name, mm.Stored))
	}
	pairs := make([]any, 0, 2*len(use))
	for name, v := range use {
		pairs = append(pairs, name, v)
	}
	s, err := parseSettings(pairs)
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
