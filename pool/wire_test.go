package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// The scripts use only the record fields that record defines, so that the
// Go struct is the one definition of the record.
func TestScriptsUseOnlyRecordFields(t *testing.T) {
	t.Parallel()
	defined := map[string]bool{}
	rt := reflect.TypeOf(record{})
	for i := range rt.NumField() {
		tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		defined[tag] = true
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	scriptRe := regexp.MustCompile("(?s)(?:NewScript|newScript)\\(prelude (?:\\+ [\\w.]+ )*\\+ `(.*?)`\\)")
	fieldRe := regexp.MustCompile(`\b(?:r|cur)\.([a-z]+)\b`)
	scripts, uses := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range scriptRe.FindAllStringSubmatch(string(b), -1) {
			scripts++
			for _, u := range fieldRe.FindAllStringSubmatch(m[1], -1) {
				uses++
				assert.True(t, defined[u[1]], "%s: a script uses record field %q, which record does not define", f, u[1])
			}
		}
	}
	for _, u := range fieldRe.FindAllStringSubmatch(prelude, -1) {
		uses++
		assert.True(t, defined[u[1]], "the prelude uses record field %q, which record does not define", u[1])
	}
	assert.GreaterOrEqual(t, scripts, 10, "the scripts were not found")
	assert.Greater(t, uses, 50)
}

// The prelude renders the Go constants into the scripts.
func TestPreludeRendersTheConstants(t *testing.T) {
	t.Parallel()
	for _, want := range []string{
		`local S_QUEUED, S_ROUTED, S_CLAIMED, S_RUNNING, S_STOPPING = "q", "r", "c", "run", "x"`,
		`local EV_START, EV_STOP, EV_NOTIFY, EV_REPLY = "start", "stop", "notify", "reply"`,
		`local REV_FIELD = "rev"`,
	} {
		assert.Contains(t, prelude, want)
	}
}

// A job's payload of up to maxInlinePayload bytes lives in its entry of
// the jobs hash, after the record; a larger one in the payloads hash. Both
// reach Start, survive the record's rewrites and show in InspectJob, and
// a move (RemoveWorker) starts the job again with its payload.
func TestPayloadsLiveInTheRecordUnlessLarge(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	rdb := srv.Client()
	n := addNode(t, rdb, redistest.Name(t))
	var mu sync.Mutex
	got := map[string][]string{}
	h := startFunc(func(_ context.Context, job *Job) error {
		mu.Lock()
		got[job.Key] = append(got[job.Key], string(job.Payload))
		mu.Unlock()
		return nil
	})
	ws := addWorkers(t, n, h, 2)
	small := "small\npayload with a newline"
	large := strings.Repeat("L", maxInlinePayload+1)
	require.NoError(t, n.DispatchJob(ctx, "s", []byte(small)))
	require.NoError(t, n.DispatchJob(ctx, "l", []byte(large)))
	require.NoError(t, n.DispatchJob(ctx, "e", nil))

	raw, err := rdb.HGet(ctx, n.lay.jobs, "s").Result()
	require.NoError(t, err)
	rec, p, ok := splitRecord(raw)
	require.True(t, ok)
	assert.Equal(t, small, p)
	r, err := parseRecord(raw)
	require.NoError(t, err)
	assert.Equal(t, stateRunning, r.State, "the record %s", rec)
	raw, err = rdb.HGet(ctx, n.lay.jobs, "l").Result()
	require.NoError(t, err)
	assert.NotContains(t, raw, "\n", "a large payload is kept apart")
	pl, err := rdb.HGet(ctx, n.lay.payloads, "l").Result()
	require.NoError(t, err)
	assert.Equal(t, large, pl)
	exists, err := rdb.HExists(ctx, n.lay.payloads, "s").Result()
	require.NoError(t, err)
	assert.False(t, exists)

	for key, want := range map[string]string{"s": small, "l": large, "e": ""} {
		info, err := n.Job(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, string(info.Payload), key)
	}
	// Moving every job (both workers leave in turn) starts each again
	// with its payload.
	addWorkers(t, n, h, 1)
	for _, w := range ws {
		require.NoError(t, n.RemoveWorker(ctx, w))
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got["s"]) >= 2 && len(got["l"]) >= 2 && len(got["e"]) >= 2
	}, 20*time.Second, 10*time.Millisecond, "every job started again on the worker left")
	mu.Lock()
	defer mu.Unlock()
	for key, want := range map[string]string{"s": small, "l": large, "e": ""} {
		for _, p := range got[key] {
			assert.Equal(t, want, p, key)
		}
	}
}

// recordRoundTrip stores a record (given as JSON) with the prelude's
// putrec and reads it back with getrec: it returns what was stored and
// the record Lua read, as JSON.
var recordRoundTrip = newScript(prelude + `
local r = cjson.decode(ARGV[1])
PAYLOAD[ARGV[2]] = ARGV[3]
putrec(ARGV[2], r)
PAYLOAD = {}
local back = getrec(ARGV[2])
return {redis.call("HGET", KEYS[1], ARGV[2]), cjson.encode(back), PAYLOAD[ARGV[2]]}
`)

// The scripts write running jobs' records compact (parseCompact), others
// and those the compact form cannot hold as JSON; Go and the prelude read
// both back as written, with the payload after them.
func TestRecordsRoundTripBetweenLuaAndGo(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	name := redistest.Name(t)
	keys := []string{"{" + name + "}:jobs", "{" + name + "}:payloads"}
	t.Cleanup(func() { srv.Client().Del(context.Background(), keys...) })
	const c = 1764400000000
	for i, tc := range []struct {
		r       record
		compact bool
	}{
		{record{State: stateRunning, Gen: 1, Nonce: "0123456789abcdef", Worker: "fedcba9876543210", Created: c, Started: c + 123, Starts: 1}, true},
		{record{State: stateRunning, Gen: 12, Nonce: "0123456789abcdef", Worker: "fedcba9876543210", Created: c, Started: c + 86400000, Starts: 7,
			LastErr: "boom: \"x\"\n e=1 ok\tü", StopNode: "cccccccccccccccc", StopReq: "-",
			Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, true},
		{record{State: stateRunning, Gen: 2, Nonce: "0123456789abcdef", Worker: "fedcba9876543210", Created: c, Started: c - 1500, Starts: 1,
			DispNode: "aaaaaaaaaaaaaaaa", DispReq: "bbbbbbbbbbbbbbbb", Changed: c + 5}, true},
		{record{State: stateQueued, Gen: 3, Nonce: "0123456789abcdef", Changed: c + 5000, Created: c, Starts: 2,
			DispNode: "aaaaaaaaaaaaaaaa", DispReq: "bbbbbbbbbbbbbbbb"}, false},
		{record{State: stateClaimed, Gen: 2, Nonce: "0123456789abcdef", Worker: "fedcba9876543210", Changed: c - 1500, Created: c, Starts: 1}, false},
		{record{State: stateStopping, Gen: 2, Nonce: "0123456789abcdef", Worker: "fedcba9876543210", Created: c, Started: c + 1, Starts: 1,
			StopNode: "cccccccccccccccc", StopReq: "dddddddddddddddd"}, false},
		{record{State: stateRunning, Gen: 1, Nonce: "a nonce with spaces", Worker: "fedcba9876543210", Created: c, Started: c}, false},
		// Handed to its worker (record.Pending): started when created.
		{record{State: stateRunning, Gen: 1, Nonce: "0123456789abcdef", Worker: "fedcba9876543210", Created: c, Started: c, Starts: 1, Pending: true}, true},
		{record{State: stateRunning, Gen: 1, Nonce: "0123456789abcdef", Worker: "fedcba9876543210", Created: c, Started: c, Starts: 1, Pending: true,
			Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, true},
		{record{State: stateRunning, Gen: 1, Nonce: "a nonce with spaces", Worker: "fedcba9876543210", Created: c, Started: c, Starts: 1, Pending: true}, false},
	} {
		in, err := json.Marshal(tc.r)
		require.NoError(t, err)
		payload := fmt.Sprintf("payload %d\nwith a newline", i)
		res, err := recordRoundTrip.Run(ctx, srv.Client(), keys, string(in), "k", payload).Slice()
		require.NoError(t, err)
		stored, luaJSON := res[0].(string), res[1].(string)
		t.Logf("stored %q", stored)
		rec, p, ok := splitRecord(stored)
		require.True(t, ok, stored)
		assert.Equal(t, payload, p)
		assert.Equal(t, payload, res[2], "getrec kept the payload")
		assert.Equal(t, !tc.compact, strings.HasPrefix(rec, "{"), "stored as %q", rec)
		got, err := parseRecord(stored)
		require.NoError(t, err, stored)
		assert.Equal(t, tc.r, got, "Go read %q", stored)
		var back record
		require.NoError(t, json.Unmarshal([]byte(luaJSON), &back))
		assert.Equal(t, tc.r, back, "Lua read %q", stored)
	}
	// A running job's record with a 64-byte payload fits a 128-byte
	// allocation (with the string's 4 bytes of header and end).
	r := record{State: stateRunning, Gen: 1, Nonce: "0123456789abcdef", Worker: "fedcba9876543210", Created: c, Started: c + 123, Starts: 1}
	in, err := json.Marshal(r)
	require.NoError(t, err)
	res, err := recordRoundTrip.Run(ctx, srv.Client(), keys, string(in), "k", strings.Repeat("p", 64)).Slice()
	require.NoError(t, err)
	assert.LessOrEqual(t, len(res[0].(string))+4, 128, "%q", res[0])
}

// An untraced dispatch with an inline payload, routed to a live worker,
// is handed to it: admitRouteScript writes the record compact by
// concatenation, as it stays while the job runs, and the worker answers
// the dispatcher without touching it. The record must be exactly what the
// prelude's encoder writes for it, so that nothing else tells the paths
// apart.
func TestAHandedJobsRecordIsThePreludes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	rdb := srv.Client()
	n := addNode(t, rdb, redistest.Name(t))
	entered := make(chan struct{})
	release := make(chan struct{})
	addWorkers(t, n, startFunc(func(_ context.Context, job *Job) error {
		if job.Key == "k" {
			close(entered)
			<-release
		}
		return nil
	}), 1)
	// The worker learns Redis's clock from its first calls, and the node
	// its slot table: then its dispatches take the fast path.
	require.Eventually(t, func() bool { return n.table().owner("k") != "" }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, n.DispatchJob(ctx, "warm", nil))
	const payload = "p\nq"
	done := make(chan error, 1)
	go func() { done <- n.DispatchJob(ctx, "k", []byte(payload)) }()
	awaitSignal(t, entered, "entered")
	reencode := func(r record) string {
		in, err := json.Marshal(r)
		require.NoError(t, err)
		res, err := recordRoundTrip.Run(ctx, rdb, []string{n.lay.jobs + ":probe", n.lay.payloads + ":probe"}, string(in), "k", payload).Slice()
		require.NoError(t, err)
		return res[0].(string)
	}

	handed, err := rdb.HGet(ctx, n.lay.jobs, "k").Result()
	require.NoError(t, err)
	assert.Regexp(t, `^p 1 [0-9a-f]{16} \S+ [0-9a-f]+ 1\np\nq$`, handed)
	r, err := parseRecord(handed)
	require.NoError(t, err)
	assert.Equal(t, stateRunning, r.State)
	assert.True(t, r.Pending)
	assert.Equal(t, r.Created, r.Started, "a handed job reads as started when it was created")
	assert.Empty(t, r.DispNode+r.DispReq, "a handed job's record does not name its dispatcher")
	assert.Equal(t, 1, r.Starts)
	assert.Equal(t, reencode(r), handed, "the prelude writes the same handed record")

	close(release)
	require.NoError(t, <-done)
	running, err := rdb.HGet(ctx, n.lay.jobs, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, handed, running, "the worker answered its dispatcher without writing the record")
}

func mustParse(t *testing.T, raw string) record {
	t.Helper()
	r, err := parseRecord(raw)
	require.NoError(t, err)
	return r
}

// One admission call may hold a queued job before a routed one: the
// routed job's fast path then finds Redis's time already read.
func TestAdmissionBatchOfQueuedThenRouted(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t))
	addWorkers(t, n, nopHandler{}, 1)
	require.Eventually(t, func() bool { return n.table().owner("r") != "" }, 10*time.Second, 5*time.Millisecond)
	tb := n.table()
	rev := strconv.FormatInt(tb.rev, 10)
	queued := &admission{ctx: ctx, key: "q", nonce: newID(), reqID: noReply, rev: rev}
	routed := &admission{ctx: ctx, key: "r", nonce: newID(), reqID: noReply, worker: tb.owner("r"), rev: rev}
	n.admitBatch(ctx, []*admission{queued, routed})
	require.NoError(t, queued.err)
	require.NoError(t, routed.err)
	assert.Equal(t, "OK", queued.res)
	assert.Equal(t, "ROUTED", routed.res)
	require.Eventually(t, func() bool {
		return recordState(ctx, n, "q") == stateRunning && recordState(ctx, n, "r") == stateRunning
	}, 10*time.Second, 5*time.Millisecond, "both jobs start")
}
