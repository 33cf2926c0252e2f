package pool

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/script"
)

// JobScan asks ScanJobs for a page of a pool's jobs.
type JobScan struct {
	// Cursor is "" for the first page, and a page's Next for the page
	// after it: an opaque string.
	Cursor string
	// Count is about how many jobs a page holds: 1 to MaxScanCount (0
	// for 50). A page may hold a few more (Redis returns whole buckets),
	// or fewer, even none, while Next is not "" (filtered pages).
	Count int
	// Worker, when set, keeps only the jobs routed to or running on that
	// worker; Prefix, when set, only those whose key starts with it.
	Worker string
	Prefix string
}

// JobPage is a page of a pool's jobs, as ScanJobs reads it.
type JobPage struct {
	// Jobs are as InspectJob reports them, without their Payload
	// (PayloadSize is set), in no particular order.
	Jobs []*JobInfo `json:"jobs"`
	// Next is the cursor of the next page: "" after the last.
	Next string `json:"next,omitempty"`
}

// MaxScanCount is the most jobs a JobScan may ask a page for.
const MaxScanCount = 1000

// scanBudget is the most job records one page looks at (a filter that
// matches few of them ends a page early, with a Next to go on from):
// about a few milliseconds of Redis time.
const scanBudget = 10_000

// ScanJobs returns a page of the jobs of pool poolName, read by HSCAN of
// the job records from the cursor q.Cursor on: one script call that looks
// at about q.Count records (at most scanBudget, 10,000, with a filter),
// whatever the pool's size. Following Next from "" until it is "" again
// returns every job that existed throughout, at least once (a job may
// come twice when the records were rehashed meanwhile); the order is
// Redis's, not the keys'. It returns an error wrapping ErrInvalidOption
// for a nil client, an invalid name, a Count out of range or a cursor
// that no page returned. A pool Redis holds nothing of has no jobs.
func ScanJobs(ctx context.Context, rdb redis.UniversalClient, poolName string, q JobScan) (*JobPage, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return nil, err
	}
	if q.Count == 0 {
		q.Count = 50
	}
	if q.Count < 1 || q.Count > MaxScanCount {
		return nil, fmt.Errorf("%w: job scan count %d: want 1 to %d", ErrInvalidOption, q.Count, MaxScanCount)
	}
	lays, err := shardLayouts(ctx, rdb, poolName, lay)
	if err != nil {
		return nil, fmt.Errorf("pool: scan jobs of %q: %w", poolName, err)
	}
	shard, cursor, err := decodeScanCursor(q.Cursor, len(lays))
	if err != nil {
		return nil, err
	}
	jobs, next, err := scanJobs(ctx, rdb, poolName, lays[shard], cursor, q)
	if err != nil {
		return nil, err
	}
	return &JobPage{Jobs: jobs, Next: encodeScanCursor(shard, next, len(lays))}, nil
}

// decodeScanCursor reads a ScanJobs cursor of a pool of shards shards:
// "" or a page's Next, which is the HSCAN cursor (a decimal) to go on
// from, after the shard to scan and a "-" on a pool of several shards
// (a shard's first page: cursor 0). It returns the shard and the HSCAN
// cursor.
func decodeScanCursor(c string, shards int) (int, string, error) {
	if c == "" {
		return 0, "0", nil
	}
	bad := fmt.Errorf("%w: job scan cursor %q: not one a page returned", ErrInvalidOption, c)
	shard := 0
	if shards > 1 {
		head, rest, ok := strings.Cut(c, "-")
		s, err := strconv.Atoi(head)
		if !ok || err != nil || s < 0 || s >= shards || strconv.Itoa(s) != head {
			return 0, "", bad
		}
		shard, c = s, rest
		if c == "0" && shard > 0 {
			return shard, c, nil
		}
	}
	if _, err := strconv.ParseUint(c, 10, 64); err != nil || c == "0" {
		return 0, "", bad
	}
	return shard, c, nil
}

// encodeScanCursor makes a page's Next of the shard it scanned and the
// HSCAN cursor it ended on: the next shard's first page after a shard's
// last, and "" after the last shard's.
func encodeScanCursor(shard int, c string, shards int) string {
	if c == "0" {
		shard++
		if shard >= shards {
			return ""
		}
	}
	if shards == 1 {
		return c
	}
	return strconv.Itoa(shard) + "-" + c
}

// scanJobs reads a page of one pool's layout (a shard's, once the pool
// shards) from HSCAN cursor on ("0" to begin), and returns its jobs and
// the cursor to go on from ("0" at the end).
func scanJobs(ctx context.Context, rdb redis.UniversalClient, poolName string, lay layout, cursor string, q JobScan) ([]*JobInfo, string, error) {
	op := fmt.Sprintf("pool: scan jobs of %q", poolName)
	res, err := script.Run(ctx, rdb, scanJobsScript, op,
		[]string{lay.jobs, lay.payloads, lay.workers, lay.alive, lay.settings},
		cursor, q.Count, scanBudget, globPrefix(q.Prefix), q.Worker)
	if err != nil {
		return nil, "", err
	}
	out, _ := res.([]any)
	if len(out) < 4 {
		return nil, "", fmt.Errorf("%s: unexpected reply %v", op, res)
	}
	sec, _ := out[0].(int64)
	usec, _ := out[1].(int64)
	now := time.Unix(sec, usec*int64(time.Microsecond))
	next, _ := out[2].(string)
	jobs := make([]*JobInfo, 0, len(out)-4)
	for _, v := range out[4:] {
		row, _ := v.([]any)
		if len(row) != 5 {
			return nil, "", fmt.Errorf("%s: unexpected row %v", op, v)
		}
		key, _ := row[0].(string)
		raw, _ := row[1].(string)
		size, _ := row[2].(int64)
		ji, err := newJobInfo(poolName, key, now, raw, nil, int(size), row[3], row[4], out[3])
		if err != nil {
			return nil, "", fmt.Errorf("%s: job %q: %w", op, key, err)
		}
		jobs = append(jobs, ji)
	}
	return jobs, next, nil
}

// globPrefix returns the HSCAN MATCH pattern of the keys starting with
// prefix: its glob characters escaped.
func globPrefix(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('*')
	return b.String()
}

// scanJobsScript reads a page of the job records by HSCAN, from a cursor
// on, until it has the jobs asked for, has looked at the budget's worth
// of records, or the scan is over. It changes nothing.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] alive,
//	KEYS[5] settings
//	ARGV[1] HSCAN cursor, ARGV[2] jobs wanted, ARGV[3] most records to
//	look at, ARGV[4] MATCH pattern, ARGV[5] worker id ("" for any)
//
// Returns {seconds, microseconds of Redis TIME, next cursor ("0" at the
// end), the pool's stored WorkerTTL (ms) or false, then per job: {key,
// its record (without the payload), the payload's size, its worker's
// entry in the workers map or false, its worker's last keep-alive or
// false}}.
var scanJobsScript = redis.NewScript(prelude + `
local t = redis.call("TIME")
local cursor, want, budget = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local pattern, wid = ARGV[4], ARGV[5]
local out = {tonumber(t[1]), tonumber(t[2]), "0", redis.call("HGET", KEYS[5], "` + settingWorkerTTL + `")}
local infos, seens = {}, {}
local found, looked = 0, 0
repeat
  local count = want - found
  if wid ~= "" or pattern ~= "*" then count = math.min(math.max(count * 4, 200), budget - looked) end
  local step = redis.call("HSCAN", KEYS[1], cursor, "MATCH", pattern, "COUNT", count)
  cursor = step[1]
  looked = looked + count
  local all = step[2]
  for i = 1, #all, 2 do
    local key, raw = all[i], all[i + 1]
    -- A worker id is in its job's record: look for it before decoding.
    if wid == "" or string.find(raw, wid, 1, true) then
      local r, p = decrec(raw)
      if wid == "" or r.w == wid then
        local nl = string.find(raw, "\n", 1, true)
        local size = p and #p or redis.call("HSTRLEN", KEYS[2], key)
        local w = r.w or ""
        if w ~= "" and infos[w] == nil then
          infos[w] = redis.call("HGET", KEYS[3], w)
          seens[w] = redis.call("HGET", KEYS[4], "w:" .. w)
        end
        out[#out + 1] = {key, nl and string.sub(raw, 1, nl - 1) or raw, size, w ~= "" and infos[w] or false, w ~= "" and seens[w] or false}
        found = found + 1
      end
    end
  end
until cursor == "0" or found >= want or looked >= budget
out[3] = cursor
return out
`)
