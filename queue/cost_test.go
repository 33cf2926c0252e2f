package queue

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/redistest"
)

// scriptCounter is a go-redis hook that counts EVALSHA and EVAL calls by
// script.
type scriptCounter struct {
	names map[string]string // sha → script name
	mu    sync.Mutex
	calls map[string]int
}

func newScriptCounter() *scriptCounter {
	names := map[string]string{}
	for name, s := range map[string]*redis.Script{
		"submit": submitScript, "dequeue": dequeueScript, "complete": completeScript,
		"keepAlive": keepAliveScript, "reap": reapScript, "register": registerScript,
		"deregister": deregisterScript, "history": historyScript, "withdraw": withdrawScript,
		"tick": tickScript,
	} {
		names[s.Hash()] = name
	}
	return &scriptCounter{names: names, calls: map[string]int{}}
}

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			name := "other"
			if a := cmd.Args(); len(a) > 1 && n == "evalsha" {
				if s, ok := c.names[fmt.Sprint(a[1])]; ok {
					name = s
				}
			}
			c.mu.Lock()
			c.calls[name]++
			c.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// envInt is the environment variable name as a positive number, or def
// (unset, not a number, or below 1).
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 1 {
		return v
	}
	return def
}

// redisCPU is Redis's CPU time so far, user and system, in seconds
// (redistest.CPU; 0 when INFO fails).
func redisCPU(ctx context.Context, rdb redis.UniversalClient) float64 {
	v, _ := redistest.CPU(ctx, rdb)
	return v
}

var commandStat = regexp.MustCompile(`(?m)^cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)`)

// BenchmarkCostPerTask measures what a task costs Redis in bench T1's shape (2
// processes × 4 workers, 64 submitters, 64-byte payloads, a no-op
// handler) on a private Redis: calls per task of each command (INFO
// commandstats), script calls per task by script, and Redis's CPU per
// task. Run it alone, once: go test -run '^$' -bench CostPerTask
// -benchtime 1x ./queue/ (SHEPHERD_COST=N for N tasks, default 20,000;
// SHEPHERD_COST_SHARDS=n for a queue of n shards, all on the one Redis;
// SHEPHERD_COST_PAYLOAD=n for payloads of n bytes, default 64);
// the numbers go into
// BENCHMARKS.md ("Cost per task").
func BenchmarkCostPerTask(bm *testing.B) {
	t := bm
	n := envInt("SHEPHERD_COST", 20000)
	shards := envInt("SHEPHERD_COST_SHARDS", 1)
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sc := newScriptCounter()
	var handles []*Queue
	open := func() *Queue {
		c := srv.NewClient()
		c.AddHook(sc)
		q, err := Open(ctx, c, "cost", WithShards(shards))
		require.NoError(t, err)
		handles = append(handles, q)
		return q
	}
	// SHEPHERD_COST_PREFETCH=n: WithPrefetch(n) (0 included); unset,
	// the process takes ahead on its own.
	serveOpts := []ServeOption{WithWorkers(4)}
	if v, err := strconv.Atoi(os.Getenv("SHEPHERD_COST_PREFETCH")); err == nil {
		serveOpts = append(serveOpts, WithPrefetch(v))
	}
	for range 2 {
		_, err := open().Serve(func(context.Context, *Task) ([]byte, error) { return nil, nil }, serveOpts...)
		require.NoError(t, err)
	}
	sub := open()
	defer func() {
		for _, q := range handles {
			_ = closeWithin(q)
		}
	}()
	admin := srv.Client()
	cpu := func() float64 { return redisCPU(ctx, admin) }
	require.NoError(t, admin.ConfigResetStat(ctx).Err())
	// With SHEPHERD_COST_SLOWLOG, every command into the slow log, for
	// each script's own time (it costs Redis CPU too).
	slowlog := os.Getenv("SHEPHERD_COST_SLOWLOG") != ""
	if slowlog {
		require.NoError(t, admin.ConfigSet(ctx, "slowlog-max-len", "2000000").Err())
		require.NoError(t, admin.SlowLogReset(ctx).Err())
		require.NoError(t, admin.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err())
	}
	sc.mu.Lock()
	sc.calls = map[string]int{}
	sc.mu.Unlock()
	cpu0 := cpu()
	payload := make([]byte, envInt("SHEPHERD_COST_PAYLOAD", 64))
	var next atomic.Int64
	var wg sync.WaitGroup
	var errs atomic.Int64
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var waits sync.WaitGroup
			for next.Add(1) <= int64(n) {
				f, err := sub.Submit(ctx, payload)
				if err != nil {
					errs.Add(1)
					continue
				}
				waits.Add(1)
				go func() {
					defer waits.Done()
					if _, err := f.Wait(ctx); err != nil {
						errs.Add(1)
					}
				}()
			}
			waits.Wait()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpuUs := (cpu() - cpu0) * 1e6 / float64(n)
	stats := admin.Info(ctx, "commandstats").Val()
	var slow []redis.SlowLog
	if slowlog {
		require.NoError(t, admin.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err())
		var err error
		slow, err = admin.SlowLogGet(ctx, 2000000).Result()
		require.NoError(t, err)
	}
	require.Zero(t, errs.Load())

	type row struct {
		cmd         string
		calls, usec float64
	}
	var rows []row
	for _, m := range commandStat.FindAllStringSubmatch(stats, -1) {
		c, _ := strconv.ParseFloat(m[2], 64)
		u, _ := strconv.ParseFloat(m[3], 64)
		rows = append(rows, row{m[1], c, u})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].calls > rows[j].calls })
	var b strings.Builder
	fmt.Fprintf(&b, "%d tasks in %v (%.0f/s); Redis CPU %.1f us/task\n", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), cpuUs)
	fmt.Fprintf(&b, "%-16s %10s %10s %10s\n", "command", "per task", "us/call", "us/task")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-16s %10.3f %10.2f %10.2f\n", r.cmd, r.calls/float64(n), r.usec/r.calls, r.usec/float64(n))
	}
	sc.mu.Lock()
	var names []string
	for k := range sc.calls {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "script %-12s %8d calls, %.4f per task\n", k, sc.calls[k], float64(sc.calls[k])/float64(n))
	}
	sc.mu.Unlock()
	type agg struct{ calls, usec float64 }
	by := map[string]*agg{}
	for _, e := range slow {
		if len(e.Args) < 2 || strings.ToLower(e.Args[0]) != "evalsha" {
			continue
		}
		name := sc.names[e.Args[1]]
		if by[name] == nil {
			by[name] = &agg{}
		}
		by[name].calls++
		by[name].usec += float64(e.Duration.Microseconds())
	}
	for name, a := range by {
		fmt.Fprintf(&b, "slowlog %-12s %8.0f calls, %7.1f us/call, %6.2f us/task\n", name, a.calls, a.usec/a.calls, a.usec/float64(n))
	}
	t.Log("\n" + b.String())
}

// BenchmarkCostPerCall measures the fixed cost of a script call: EVALSHA's
// usec per call (INFO commandstats) of scripts that return at once, with
// the prelude and the function groups the hot scripts add. Run it as
// BenchmarkCostPerTask.
func BenchmarkCostPerCall(bm *testing.B) {
	t := bm
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	lay, err := newLayout("costcall")
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		s    *redis.Script
	}{
		{"bare", redis.NewScript(`return 1`)},
		{"clock", redis.NewScript(prelude[:len(member.LuaClock)] + `return 1`)},
		{"prelude", redis.NewScript(prelude + `return 1`)},
		{"prelude+submitFn", redis.NewScript(prelude + submitFn + `return 1`)},
		{"prelude+takeFn", redis.NewScript(prelude + takeFn + `return 1`)},
		{"prelude+finishFn+takeFn", redis.NewScript(prelude + finishFn + takeFn + `return 1`)},
		{"empty dequeue", dequeueScript},
	} {
		require.NoError(t, rdb.ConfigResetStat(ctx).Err())
		const n = 3000
		for range n {
			_ = c.s.Run(ctx, rdb, lay.common(lay.inflight("p")), lay.commonArgs("p", 1, 1)...).Err()
		}
		m := regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=(\d+)`).FindStringSubmatch(rdb.Info(ctx, "commandstats").Val())
		calls, _ := strconv.ParseFloat(m[1], 64)
		usec, _ := strconv.ParseFloat(m[2], 64)
		t.Logf("%-26s %6.1f us/call", c.name, usec/calls)
	}
}

// BenchmarkCostComplete measures completeScript alone as a busy process of 4
// workers runs it: each call records 4 successes and takes 4 tasks, from
// a queue of waiting tasks. Run it as BenchmarkCostPerTask.
func BenchmarkCostComplete(bm *testing.B) {
	t := bm
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	q, err := Open(ctx, srv.NewClient(), "costcomplete")
	require.NoError(t, err)
	defer func() { _ = closeWithin(q) }()
	k := envInt("SHEPHERD_COST_K", 1)
	n, _ := strconv.Atoi(os.Getenv("SHEPHERD_COST"))
	n = max(n, 8000)
	_, err = submitMany(ctx, q, n)
	require.NoError(t, err)
	run := func(s *redis.Script, args []any) []any {
		res, err := s.Run(ctx, rdb, q.lay.common(q.lay.inflight(q.proc)), args...).Result()
		require.NoError(t, err)
		return res.([]any)
	}
	ids := func(out []any) []string {
		var r []string
		for i := 2; i+takenFields-1 < len(out); i += takenFields {
			r = append(r, out[i].(string))
		}
		return r
	}
	split := os.Getenv("SHEPHERD_COST_SPLIT") != ""
	taken := ids(run(dequeueScript, q.lay.commonArgs(q.proc, k, promoteLimit)))
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	if split {
		require.NoError(t, rdb.ConfigSet(ctx, "slowlog-max-len", "2000000").Err())
		require.NoError(t, rdb.SlowLogReset(ctx).Err())
		require.NoError(t, rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err())
	}
	calls := 0
	for len(taken) > 0 {
		args := q.lay.commonArgs(q.proc, k, promoteLimit)
		if split {
			// Ends alone, then a take alone: what each part costs.
			args = q.lay.commonArgs(q.proc, 0, promoteLimit)
		}
		for _, id := range taken {
			args = append(args, id, 1, "ok", "", 0, "")
		}
		out := run(completeScript, args)
		if split {
			out = append(out[:2+len(taken)], run(dequeueScript, q.lay.commonArgs(q.proc, k, promoteLimit))...)
		}
		taken = ids(out[2+len(taken):])
		calls++
	}
	stats := rdb.Info(ctx, "commandstats").Val()
	if split {
		// Each script's own time, from the slow log (every command in it).
		require.NoError(t, rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err())
		slow, err := rdb.SlowLogGet(ctx, -1).Result()
		require.NoError(t, err)
		us := map[string]time.Duration{}
		cnt := map[string]int{}
		for _, e := range slow {
			if len(e.Args) > 1 && e.Args[0] == "evalsha" {
				name := map[string]string{completeScript.Hash(): "complete (ends)", dequeueScript.Hash(): "dequeue"}[e.Args[1]]
				us[name] += e.Duration
				cnt[name]++
			}
		}
		for name, d := range us {
			t.Logf("%s: %d calls, %.1f us/call", name, cnt[name], float64(d.Microseconds())/float64(cnt[name]))
		}
	}
	var total float64
	var b strings.Builder
	for _, m := range commandStat.FindAllStringSubmatch(stats, -1) {
		c, _ := strconv.ParseFloat(m[2], 64)
		u, _ := strconv.ParseFloat(m[3], 64)
		if m[1] == "evalsha" {
			fmt.Fprintf(&b, "complete: %d calls, %.1f us/call, %.2f us/task\n", calls, u/c, u/float64(n))
			continue
		}
		if m[1] == "config|resetstat" {
			continue
		}
		total += u
		fmt.Fprintf(&b, "  %-10s %6.2f per call %6.2f us/call\n", m[1], c/float64(calls), u/c)
	}
	fmt.Fprintf(&b, "inner commands: %.1f us/call\n", total/float64(calls))
	t.Log("\n" + b.String())
}

// submitMany submits n tasks of 64 bytes from 64 goroutines.
func submitMany(ctx context.Context, q *Queue, n int) ([]*Future, error) {
	var mu sync.Mutex
	var fs []*Future
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				f, err := q.Submit(ctx, make([]byte, 64))
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
				mu.Lock()
				fs = append(fs, f)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return nil, e.(error)
	}
	return fs, nil
}

// floorTake is the take of floorWork and outcomesWork: k ids popped,
// each task's hash read, the ids into active.
const floorTake = `
local ids = redis.call('RPOP', KEYS[1], tonumber(ARGV[2]))
if not ids then return {} end
local out, act = {}, {}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', KEYS[2] .. id, 'p', 'enq')
  out[#out+1] = id
  out[#out+1] = f[1]
  act[#act+1] = id
  act[#act+1] = ARGV[1]
end
redis.call('HSET', KEYS[3], unpack(act))
return out`

// floorSubmit and floorWork are BenchmarkCostFloor's scripts: KEYS[1]
// ready, KEYS[2] the task key prefix (the floor runs on one private
// Redis), KEYS[3] active.
var floorSubmit = redis.NewScript(`
local t = redis.call('TIME')[1]
for i = 2, #ARGV do
  redis.call('HSET', KEYS[2] .. ARGV[i], 'p', ARGV[1], 'sub', 'proc0123456789ab', 'enq', t)
end
redis.call('LPUSH', KEYS[1], unpack(ARGV, 2))
return 1`)

var floorWork = redis.NewScript(`
local t = redis.call('TIME')[1]
local ended = {}
for i = 3, #ARGV do
  local tk = KEYS[2] .. ARGV[i]
  redis.call('HSET', tk, 'st', 'done', 'fin', t, 'p', '')
  redis.call('PEXPIRE', tk, 86400000)
  ended[#ended+1] = ARGV[i]
end
if #ended > 0 then redis.call('HDEL', KEYS[3], unpack(ended)) end
` + floorTake)

// packedSubmit and packedWork are BenchmarkCostFloor's scripts for
// SHEPHERD_COST_MODEL=packed, a storage model with no key per task:
// KEYS[1] ready, KEYS[2] the shard's hash of waiting and running tasks
// (id → a record the client packed: submitter, time, payload), KEYS[3]
// active, KEYS[4] the hash of outcomes (id → a packed outcome), KEYS[5]
// the list of outcomes to delete when their retention ends (one list per
// period, so one command a call). Every command carries the batch: no
// command per task.
var packedSubmit = redis.NewScript(`
redis.call('HSET', KEYS[2], unpack(ARGV))
local ids = {}
for i = 1, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
redis.call('LPUSH', KEYS[1], unpack(ids))
return 1`)

var packedWork = redis.NewScript(`
local t = redis.call('TIME')[1]
if #ARGV > 2 then
  local ended, outs = {}, {}
  for i = 3, #ARGV, 2 do
    ended[#ended + 1] = ARGV[i]
    outs[#outs + 1] = ARGV[i]
    outs[#outs + 1] = ARGV[i + 1]
  end
  redis.call('HSET', KEYS[4], unpack(outs))
  redis.call('HDEL', KEYS[2], unpack(ended))
  redis.call('HDEL', KEYS[3], unpack(ended))
  redis.call('RPUSH', KEYS[5], unpack(ended))
end
local ids = redis.call('RPOP', KEYS[1], tonumber(ARGV[2]))
if not ids then return {} end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
local out, act = {}, {}
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = recs[i]
  act[#act + 1] = id
  act[#act + 1] = ARGV[1]
end
redis.call('HSET', KEYS[3], unpack(act))
return out`)

// msgpackSubmit and msgpackWork are packedSubmit and packedWork with the
// records packed and read in Lua (cmsgpack), as a queue's scripts would:
// a submit packs the payload, submitter and time of each task; an end
// reads its task's record (one HMGET for the call's batch) and packs an
// outcome from it; a take unpacks each record for its payload and
// submitter. SHEPHERD_COST_MODEL=msgpack.
var msgpackSubmit = redis.NewScript(`
local t = tonumber(redis.call('TIME')[1]) * 1000
local recs, ids = {}, {}
for i = 2, #ARGV do
  recs[#recs + 1] = ARGV[i]
  recs[#recs + 1] = cmsgpack.pack({p = ARGV[1], sub = 'proc0123456789ab', enq = t})
  ids[#ids + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(recs))
redis.call('LPUSH', KEYS[1], unpack(ids))
return 1`)

var msgpackWork = redis.NewScript(`
local t = tonumber(redis.call('TIME')[1]) * 1000
if #ARGV > 2 then
  local ended = {}
  for i = 3, #ARGV do ended[#ended + 1] = ARGV[i] end
  local recs = redis.call('HMGET', KEYS[2], unpack(ended))
  local outs = {}
  for i, id in ipairs(ended) do
    local r = cmsgpack.unpack(recs[i])
    outs[#outs + 1] = id
    outs[#outs + 1] = cmsgpack.pack({st = 'done', fin = t, att = 1, enq = r.enq})
  end
  redis.call('HSET', KEYS[4], unpack(outs))
  redis.call('HDEL', KEYS[2], unpack(ended))
  redis.call('HDEL', KEYS[3], unpack(ended))
  redis.call('RPUSH', KEYS[5], unpack(ended))
end
local ids = redis.call('RPOP', KEYS[1], tonumber(ARGV[2]))
if not ids then return {} end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
local out, act = {}, {}
for i, id in ipairs(ids) do
  local r = cmsgpack.unpack(recs[i])
  out[#out + 1] = id
  out[#out + 1] = r.p
  act[#act + 1] = id
  act[#act + 1] = ARGV[1] .. '\n1\n' .. t .. '\n' .. r.sub .. '\n\n\n'
end
redis.call('HSET', KEYS[3], unpack(act))
return out`)

// outcomesWork is floorWork with the outcomes packed in Lua into one
// hash (and a list of ids to expire) instead of each task's hash: the
// waiting tasks keep a hash each, a task's hash is read whole at its
// end (HGETALL, what an outcome keeps) and deleted with its batch's.
// SHEPHERD_COST_MODEL=outcomes.
var outcomesWork = redis.NewScript(`
local t = tonumber(redis.call('TIME')[1]) * 1000
if #ARGV > 2 then
  local ended, keys, outs = {}, {}, {}
  for i = 3, #ARGV do
    local id = ARGV[i]
    local f = redis.call('HGETALL', KEYS[2] .. id)
    ended[#ended + 1] = id
    keys[#keys + 1] = KEYS[2] .. id
    outs[#outs + 1] = id
    outs[#outs + 1] = cmsgpack.pack({st = 'done', fin = t, att = 1, enq = f[6]})
  end
  redis.call('HSET', KEYS[4], unpack(outs))
  redis.call('DEL', unpack(keys))
  redis.call('HDEL', KEYS[3], unpack(ended))
  redis.call('RPUSH', KEYS[5], unpack(ended))
end
` + floorTake)

// BenchmarkCostFloor measures the floor of this design: the least Redis
// CPU per task a queue that keeps a hash per task and records and takes
// in one script call per batch can cost, in T1's shape. Its scripts do
// what no queue can skip and nothing else: a submit writes each task's
// hash (payload, submitter, time) and pushes the ids (14 a call, as T1's
// submitters batch); a process's call records k ends (a hash write and
// an expiry each, the ids out of the active hash) and takes k tasks (a
// pop, a read of each, the ids into the active hash). No lease, tenant,
// count, message, index or history. 2 processes, k = SHEPHERD_COST_K (4:
// T1's idle workers), SHEPHERD_COST tasks (20,000). Run it as
// BenchmarkCostPerTask, beside it: BENCHMARKS.md, "The floor".
//
// With SHEPHERD_COST_MODEL=packed it runs the same with packedSubmit and
// packedWork: tasks and outcomes as packed records in one hash each,
// every command a call's batch (BENCHMARKS.md, "Taking ahead"); with
// msgpack, the same with the records packed in Lua (msgpackSubmit,
// msgpackWork); with outcomes, a hash per waiting task and the outcomes
// packed (outcomesWork). It also logs Redis's memory per waiting task
// (after the submits of a first batch of SHEPHERD_COST tasks, before any
// take) and per kept outcome (BENCHMARKS.md, "Records").
func BenchmarkCostFloor(bm *testing.B) {
	t := bm
	n := envInt("SHEPHERD_COST", 20000)
	k := envInt("SHEPHERD_COST_K", 4)
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := srv.Client()
	cpu := func() float64 { return redisCPU(ctx, admin) }
	keys := []string{"{f}:ready", "{f}:task:", "{f}:active"}
	payload := string(make([]byte, 64))
	submit, work := floorSubmit, floorWork
	model := os.Getenv("SHEPHERD_COST_MODEL")
	packed := model == "packed"
	switch model {
	case "", "hash":
	case "packed":
		submit, work = packedSubmit, packedWork
	case "msgpack":
		submit, work = msgpackSubmit, msgpackWork
	case "outcomes":
		work = outcomesWork
	default:
		t.Fatalf("SHEPHERD_COST_MODEL=%q: want hash, packed, msgpack or outcomes", model)
	}
	if model != "" && model != "hash" {
		keys = []string{"{f}:ready", "{f}:tasks", "{f}:active", "{f}:outcomes", "{f}:expire:0"}
		if model == "outcomes" {
			keys[1] = "{f}:task:"
		}
	}
	// Memory first: n tasks submitted, then run, by one client; then the
	// keys go.
	mem := func() float64 {
		v, _ := strconv.ParseFloat(regexp.MustCompile(`used_memory:(\d+)`).FindStringSubmatch(admin.Info(ctx, "memory").Val())[1], 64)
		return v
	}
	c := srv.NewClient()
	mem0 := mem()
	for i := 0; i < n; i += 14 {
		args := []any{payload}
		if packed {
			args = args[:0]
		}
		for j := i; j < min(i+14, n); j++ {
			args = append(args, fmt.Sprintf("id%014d", j))
			if packed {
				args = append(args, "proc0123456789ab\n1764300000000\n"+payload)
			}
		}
		require.NoError(t, submit.Run(ctx, c, keys, args...).Err())
	}
	waiting := (mem() - mem0) / float64(n)
	var ends []any
	for {
		args := append([]any{"proc0", 100}, ends...)
		res, err := work.Run(ctx, c, keys, args...).Slice()
		require.NoError(t, err)
		if len(res) == 0 && len(ends) == 0 {
			break
		}
		ends = ends[:0]
		for i := 0; i < len(res); i += 2 {
			ends = append(ends, res[i])
			if packed {
				ends = append(ends, "done\n1764300000001\n")
			}
		}
	}
	kept := (mem() - mem0) / float64(n)
	require.NoError(t, admin.FlushAll(ctx).Err())
	t.Logf("memory: %.1f bytes a waiting task, %.1f a kept outcome", waiting, kept)

	require.NoError(t, admin.ConfigResetStat(ctx).Err())
	cpu0 := cpu()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 4 {
		wg.Add(1)
		c := srv.NewClient()
		go func() {
			defer wg.Done()
			for {
				args := []any{payload}
				if packed {
					args = args[:0]
				}
				for range 14 {
					i := next.Add(1)
					if i > int64(n) {
						break
					}
					args = append(args, fmt.Sprintf("id%014d", i))
					if packed {
						// Submitter, time and payload, packed by the client.
						args = append(args, "proc0123456789ab\n1764300000000\n"+payload)
					}
				}
				if len(args) <= 1 {
					return
				}
				require.NoError(t, submit.Run(ctx, c, keys, args...).Err())
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	for p := range 2 {
		wg.Add(1)
		c := srv.NewClient()
		go func() {
			defer wg.Done()
			var ends []string
			for done.Load() < int64(n) {
				args := []any{fmt.Sprint("proc", p), k}
				for _, e := range ends {
					args = append(args, e)
					if packed {
						args = append(args, "done\n1764300000001\n") // the outcome: state, time, result
					}
				}
				done.Add(int64(len(ends)))
				res, err := work.Run(ctx, c, keys, args...).Slice()
				require.NoError(t, err)
				ends = ends[:0]
				for i := 0; i < len(res); i += 2 {
					ends = append(ends, res[i].(string))
				}
				if len(ends) == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	stats := admin.Info(ctx, "commandstats").Val()
	m := regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=(\d+)`).FindStringSubmatch(stats)
	calls, _ := strconv.ParseFloat(m[1], 64)
	usec, _ := strconv.ParseFloat(m[2], 64)
	t.Logf("%d tasks in %v, k=%d, model %q: Redis CPU %.1f us/task; evalsha %.3f calls/task, %.1f us/task", n, el.Round(time.Millisecond), k, model,
		(cpu()-cpu0)*1e6/float64(n), calls/float64(n), usec/float64(n))
}
