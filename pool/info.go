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
)

// JobKeys returns the keys of every job in the pool, whatever its state
// (queued, starting, running or being moved), sorted. It reads Redis.
func (n *Node) JobKeys(ctx context.Context) ([]string, error) {
	if err := n.errClosed(); err != nil {
		return nil, err
	}
	keys, err := n.rdb.HKeys(ctx, n.lay.jobs).Result()
	if err != nil {
		return nil, fmt.Errorf("pool: job keys: %w", err)
	}
	sort.Strings(keys)
	return keys, nil
}

// jobRecord is the part of a job record that Workers reads.
type jobRecord struct {
	State  string `json:"s"`
	Worker string `json:"w"`
}

// Workers returns every worker of the pool with its node, slot, last
// keep-alive, health and job keys, sorted by slot. It reads Redis.
func (n *Node) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if err := n.errClosed(); err != nil {
		return nil, err
	}
	pipe := n.rdb.Pipeline()
	workersCmd := pipe.HGetAll(ctx, n.lay.workers)
	slotsCmd := pipe.HGetAll(ctx, n.lay.slots)
	aliveCmd := pipe.HGetAll(ctx, n.lay.alive)
	jobsCmd := pipe.HGetAll(ctx, n.lay.jobs)
	timeCmd := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("pool: workers: %w", err)
	}
	now := timeCmd.Val()
	slotOf := map[string]int{}
	for k, v := range slotsCmd.Val() {
		if i, err := strconv.Atoi(k); err == nil {
			slotOf[v] = i
		}
	}
	keysOf := map[string][]string{}
	for key, raw := range jobsCmd.Val() {
		var r jobRecord
		if json.Unmarshal([]byte(raw), &r) == nil && r.Worker != "" && r.State != "q" {
			keysOf[r.Worker] = append(keysOf[r.Worker], key)
		}
	}
	var out []WorkerInfo
	for id, raw := range workersCmd.Val() {
		var info workerInfo
		_ = json.Unmarshal([]byte(raw), &info)
		wi := WorkerInfo{ID: id, Node: info.Node, Slot: -1, Keys: keysOf[id]}
		if s, ok := slotOf[id]; ok {
			wi.Slot = s
		}
		if ms, err := strconv.ParseInt(aliveCmd.Val()["w:"+id], 10, 64); err == nil {
			wi.LastSeen = time.UnixMilli(ms)
			wi.Healthy = now.Sub(wi.LastSeen) <= n.cfg.workerTTL
		}
		sort.Strings(wi.Keys)
		out = append(out, wi)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Slot != out[j].Slot {
			return out[i].Slot < out[j].Slot
		}
		return strings.Compare(out[i].ID, out[j].ID) < 0
	})
	return out, nil
}

// liveWorkersScript counts the workers whose keep-alive is within the TTL,
// by Redis's clock.
//
//	KEYS[1] alive, KEYS[2] workers map
//	ARGV[1] worker TTL in ms
var liveWorkersScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for _, id in ipairs(redis.call("HKEYS", KEYS[2])) do
  local seen = redis.call("HGET", KEYS[1], "w:" .. id)
  if seen and now - tonumber(seen) <= tonumber(ARGV[1]) then n = n + 1 end
end
return n
`)

// LiveWorkers returns how many workers of the pool are live: registered,
// with a keep-alive within the pool's WorkerTTL by Redis's clock. Unlike
// Workers it does not read the job records: it costs O(workers). A
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
