package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// The queue's recent past, kept in Redis by its processes so that any
// reader (the dashboard, several of them) sees the same history, from
// before it started: every process adds what it saw to the bucket of the
// moment every HistoryFine, and the process holding the janitor lease
// samples the depth. Buckets are hashes that expire (layout.histPrefix):
// HistoryFine ones after an hour, HistoryCoarse ones after a day.
const (
	HistoryFine       = 10 * time.Second
	HistoryFineSpan   = time.Hour
	HistoryCoarse     = time.Minute
	HistoryCoarseSpan = 24 * time.Hour
)

// HistoryPoint is one bucket of the queue's history.
type HistoryPoint struct {
	At time.Time // the bucket's start, Redis's clock
	// Done, Failed and Dead count, over the bucket, the tasks that
	// succeeded, the attempts that failed (an error, a panic, a timeout)
	// and the tasks that became dead letters.
	Done, Failed, Dead int64
	// HandlerP50 and HandlerP99 are the percentiles of the handlers' run
	// times, WaitP50 and WaitP99 those of the waits from due to start,
	// over every process's attempts in the bucket (within 19%: they are
	// read from histograms with four bins an octave); zero without any.
	HandlerP50, HandlerP99, WaitP50, WaitP99 time.Duration
	// Depth as sampled once in the bucket (the last sample of a coarse
	// one); Sampled is false when no process sampled it.
	Available, Delayed, Retrying, InFlight, DeadLetters int64
	Sampled                                             bool
}

// History returns the last n buckets of the queue's history at step
// (HistoryFine, up to an hour; HistoryCoarse, up to a day), oldest
// first, the last one the bucket under way. Buckets nobody wrote are
// zero, with their time. On a queue of n shards the buckets of every
// shard add up (n reads a bucket, in the same round trip).
func (q *Client) History(ctx context.Context, step time.Duration, n int) ([]HistoryPoint, error) {
	var span time.Duration
	switch step {
	case HistoryFine:
		span = HistoryFineSpan
	case HistoryCoarse:
		span = HistoryCoarseSpan
	default:
		return nil, invalid("history step must be HistoryFine or HistoryCoarse, got %v", step)
	}
	if n < 1 || time.Duration(n)*step > span {
		return nil, invalid("history of %d buckets of %v: want 1 to %d", n, step, span/step)
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	now, err := q.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: history: %w", err)
	}
	s := int64(step / time.Second)
	last := now.Unix() / s * s
	pipe := q.rdb.Pipeline()
	cmds := make([][]*redis.MapStringStringCmd, n)
	for i := range n {
		for _, l := range all {
			cmds[i] = append(cmds[i], pipe.HGetAll(ctx, l.history(s, last-int64(n-1-i)*s)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: history: %w", err)
	}
	out := make([]HistoryPoint, n)
	for i, shards := range cmds {
		h := shards[0].Val()
		for _, c := range shards[1:] {
			h = addHistory(h, c.Val())
		}
		out[i] = parseHistory(time.Unix(last-int64(n-1-i)*s, 0), h)
	}
	return out, nil
}

// addHistory adds the bucket b of one shard to the bucket a of others:
// counters, bins and sampled depths (sampled in one shard, or each its
// own) add up.
func addHistory(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	sum := make(map[string]string, len(a)+len(b))
	for f, v := range a {
		sum[f] = v
	}
	for f, v := range b {
		x, _ := strconv.ParseInt(sum[f], 10, 64)
		y, _ := strconv.ParseInt(v, 10, 64)
		sum[f] = strconv.FormatInt(x+y, 10)
	}
	return sum
}

func parseHistory(at time.Time, h map[string]string) HistoryPoint {
	p := HistoryPoint{At: at}
	num := func(f string) int64 { v, _ := strconv.ParseInt(h[f], 10, 64); return v }
	p.Done, p.Failed, p.Dead = num("done"), num("failed"), num("dead")
	p.HandlerP50, p.HandlerP99 = binPercentiles(h, "h")
	p.WaitP50, p.WaitP99 = binPercentiles(h, "w")
	if _, ok := h["=avail"]; ok {
		p.Sampled = true
		p.Available, p.Delayed, p.Retrying = num("=avail"), num("=delayed"), num("=retry")
		p.InFlight, p.DeadLetters = num("=inflight"), num("=dead")
	}
	return p
}

// Histogram bins of durations: bin b holds [2^(b/4), 2^((b+1)/4)) µs.
const binsPerOctave = 4

func binOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return int(math.Floor(math.Log2(us) * binsPerOctave))
}

// binTop is the upper bound of bin b.
func binTop(b int) time.Duration {
	return time.Duration(math.Pow(2, float64(b+1)/binsPerOctave) * float64(time.Microsecond))
}

// binPercentiles reads the 50th and 99th percentiles from the bins of a
// bucket whose fields are prefix + bin.
func binPercentiles(h map[string]string, prefix string) (p50, p99 time.Duration) {
	type bin struct {
		b int
		n int64
	}
	var bins []bin
	var total int64
	for f, v := range h {
		rest, ok := strings.CutPrefix(f, prefix)
		if !ok {
			continue
		}
		b, err := strconv.Atoi(rest)
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		bins = append(bins, bin{b, n})
		total += n
	}
	if total == 0 {
		return 0, 0
	}
	sort.Slice(bins, func(i, j int) bool { return bins[i].b < bins[j].b })
	at := func(pct float64) time.Duration {
		want := int64(math.Ceil(pct / 100 * float64(total)))
		var seen int64
		for _, x := range bins {
			seen += x.n
			if seen >= want {
				return binTop(x.b)
			}
		}
		return binTop(bins[len(bins)-1].b)
	}
	return at(50), at(99)
}

// history accumulates what this process saw since its last flush.
type history struct {
	mu                 sync.Mutex
	done, failed, dead int64
	handler, wait      map[int]int64
}

func (h *history) ran(d time.Duration) {
	h.mu.Lock()
	if h.handler == nil {
		h.handler = map[int]int64{}
	}
	h.handler[binOf(d)]++
	h.mu.Unlock()
}

func (h *history) waited(d time.Duration) {
	h.mu.Lock()
	if h.wait == nil {
		h.wait = map[int]int64{}
	}
	h.wait[binOf(d)]++
	h.mu.Unlock()
}

// recorded counts an attempt's end of kind whose outcome Redis recorded
// as outcome (completeScript's).
func (h *history) recorded(kind, outcome string) {
	h.mu.Lock()
	switch {
	case outcome == "done":
		h.done++
	case outcome == "STALE":
	case kind == "fail" || kind == "perm":
		h.failed++
		if outcome == "dead" {
			h.dead++
		}
	}
	h.mu.Unlock()
}

// take returns the counters as field, increment pairs and resets them.
func (h *history) take() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []any
	for f, v := range map[string]int64{"done": h.done, "failed": h.failed, "dead": h.dead} {
		if v > 0 {
			out = append(out, f, v)
		}
	}
	for b, v := range h.handler {
		out = append(out, "h"+strconv.Itoa(b), v)
	}
	for b, v := range h.wait {
		out = append(out, "w"+strconv.Itoa(b), v)
	}
	h.done, h.failed, h.dead, h.handler, h.wait = 0, 0, 0, nil, nil
	return out
}

// historyLoop adds this process's counters to the history every
// HistoryFine, with the depth when it holds the janitor lease, and once
// more when the Queue closes.
func (q *Queue) historyLoop() {
	ctx := q.tasks.Context()
	t := time.NewTicker(HistoryFine)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), loopCallTimeout)
			q.flushHistory(fctx, false)
			cancel()
			return
		case <-t.C:
		}
		q.flushHistory(ctx, q.janitor.Load())
	}
}

// flushHistory writes what this process saw since its last flush, and
// the depth when depth is true (of every shard, added up by Stats), to
// the home shard's bucket: History adds up every shard's.
func (q *Queue) flushHistory(ctx context.Context, depth bool) {
	fields := q.hist.take()
	if depth {
		if st, err := q.Stats(ctx); err == nil {
			fields = append(fields, "=avail", st.Available, "=delayed", st.Delayed, "=retry", st.Retrying,
				"=inflight", st.InFlight, "=dead", st.Dead)
		}
	}
	if len(fields) == 0 {
		return
	}
	args := q.lay.commonArgs(int64(HistoryFine/time.Second), HistoryFineSpan.Milliseconds(),
		int64(HistoryCoarse/time.Second), HistoryCoarseSpan.Milliseconds())
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	if _, err := script.Run(cctx, q.rdb, historyScript, "queue: history", q.lay.common(), append(args, fields...)...); err != nil && ctx.Err() == nil {
		q.logger.Debug("writing the history failed", "error", err)
	}
}

// historyScript adds counters to the buckets of now (Redis's clock) at
// both steps, and sets sampled values ("=" fields), then makes each
// bucket expire after its span.
//
//	ARGV[4] fine step (s), ARGV[5] its span (ms), ARGV[6] coarse step
//	(s), ARGV[7] its span (ms), then field, value pairs
var historyScript = redis.NewScript(prelude + `
local t = now()
for _, s in ipairs({{ARGV[4], ARGV[5]}, {ARGV[6], ARGV[7]}}) do
  local step = tonumber(s[1])
  local at = math.floor(t / 1000 / step) * step
  local key = string.sub(P_TASK, 1, -6) .. 'hist:' .. step .. ':' .. at
  for i = 8, #ARGV, 2 do
    if string.sub(ARGV[i], 1, 1) == '=' then
      redis.call('HSET', key, ARGV[i], ARGV[i + 1])
    else
      redis.call('HINCRBY', key, ARGV[i], ARGV[i + 1])
    end
  end
  redis.call('PEXPIRE', key, s[2])
end
return 'OK'
`)
