package pool

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// scanAll follows ScanJobs from the first page to the last and returns
// every job it saw by key, and how many pages it took.
func scanAll(t testing.TB, ctx context.Context, pool string, q JobScan) (map[string]*JobInfo, int) {
	t.Helper()
	seen := map[string]*JobInfo{}
	pages := 0
	for {
		page, err := ScanJobs(ctx, srv.Client(), pool, q)
		require.NoError(t, err)
		pages++
		for _, j := range page.Jobs {
			seen[j.Key] = j
		}
		if page.Next == "" {
			return seen, pages
		}
		q.Cursor = page.Next
	}
}

// TestScanJobs: following the pages from "" to the end lists every job
// once at least, as InspectJob reports it but for the payload; a worker
// filter lists exactly that worker's jobs, a prefix filter exactly the
// keys that start with it (glob characters in it are no glob).
func TestScanJobs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	addWorkers(t, n, newRecorder(), 3)
	var keys []string
	for i := range 600 {
		keys = append(keys, keyN(i))
	}
	keys = append(keys, "odd*[key]?", "odd*other")
	dispatchAll(t, ctx, n, keys, []byte("payload"))
	big := make([]byte, maxInlinePayload+10)
	require.NoError(t, n.DispatchJob(ctx, "big", big))
	keys = append(keys, "big")
	slices.Sort(keys)

	all, pages := scanAll(t, ctx, name, JobScan{Count: 50})
	assert.Equal(t, keys, slices.Sorted(maps.Keys(all)), "every job")
	assert.Greater(t, pages, 5, "pages of about 50 jobs")
	st, err := Inspect(ctx, srv.Client(), name)
	require.NoError(t, err)
	for _, k := range []string{keyN(7), "big", "odd*[key]?"} {
		want, err := InspectJob(ctx, srv.Client(), name, k)
		require.NoError(t, err)
		got := all[k]
		assert.Nil(t, got.Payload, "a page leaves the payload out")
		want.Payload, want.Time, got.Time = nil, time.Time{}, time.Time{}
		assert.Equal(t, want, got, k)
	}
	assert.Equal(t, len(big), all["big"].PayloadSize)
	assert.Equal(t, len("payload"), all[keyN(7)].PayloadSize)

	for _, w := range st.Workers {
		mine, _ := scanAll(t, ctx, name, JobScan{Worker: w.ID, Count: 20})
		assert.Equal(t, w.Keys, slices.Sorted(maps.Keys(mine)), "the jobs of worker %s", w.ID)
	}
	for prefix, want := range map[string][]string{
		"job-01":  keysFrom(100, 200),
		"job-059": keysFrom(590, 600),
		"odd*[":   {"odd*[key]?"},
		"odd*":    {"odd*[key]?", "odd*other"},
		"nothing": nil,
	} {
		got, _ := scanAll(t, ctx, name, JobScan{Prefix: prefix})
		assert.Equal(t, want, slices.Sorted(maps.Keys(got)), "prefix %q", prefix)
	}

	for _, q := range []JobScan{{Count: -1}, {Count: MaxScanCount + 1}, {Cursor: "x"}, {Cursor: "0"}, {Cursor: "-3"}} {
		_, err := ScanJobs(ctx, srv.Client(), name, q)
		assert.ErrorIs(t, err, ErrInvalidOption, "%+v", q)
	}
	_, err = ScanJobs(ctx, nil, name, JobScan{})
	assert.ErrorIs(t, err, ErrInvalidOption)
	none, err := ScanJobs(ctx, srv.Client(), name+"-none", JobScan{})
	require.NoError(t, err)
	assert.Empty(t, none.Jobs)
	assert.Empty(t, none.Next)
}

func keysFrom(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, keyN(i))
	}
	return out
}

// TestGlobPrefix: a prefix's glob characters are escaped.
func TestGlobPrefix(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "*", globPrefix(""))
	assert.Equal(t, `a\*b\?\[c\]\\*`, globPrefix(`a*b?[c]\`))
	assert.Equal(t, "é*", globPrefix("é"))
}
