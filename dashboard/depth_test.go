package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// TestTenantListsExactAtDepth: 200,000 tasks over 50 tenants, one in ten
// delayed; the last tenant's lists of waiting and delayed tasks hold
// exactly its tasks, every page of them (the list no longer stops after
// the first 20,000 tasks of the state), and the pages answer. It logs
// how long a page took (no assertion on it: the machine varies).
//
// It runs alone (not t.Parallel) on a Redis of its own: writing 200,000
// tasks saturates a Redis and both cores for a while, and the browser
// tests that shared them with it ran out of their time
// (TestTenantPagePauseAndResume failed so in CI).
func TestTenantListsExactAtDepth(t *testing.T) {
	if testing.Short() {
		t.Skip("200,000 tasks: not in -short")
	}
	const total, tenants = 200_000, 50
	ctx := testCtx(t, 4*time.Minute)
	name := redistest.Name(t)
	own := redistest.Start(t)
	q, err := queue.Open(ctx, own.Client(), name, queue.WithMaxQueued(total))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = q.Close(context.Background())
		c, err := queue.NewClient(own.Client(), name)
		if err == nil {
			_, _ = c.Delete(context.Background(), queue.DeleteEvenIfLive())
		}
	})
	for i := range tenants {
		require.NoError(t, q.SetTenant(ctx, fmt.Sprintf("t%03d", i), 10))
	}
	// Task i is of tenant i % 50, delayed when i / 50 % 10 == 9: one in ten of each tenant.
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 64 {
				opts := []queue.SubmitOption{queue.WithTenant(fmt.Sprintf("t%03d", i%tenants)), queue.WithTaskID(fmt.Sprintf("task-%06d", i))}
				if i/tenants%10 == 9 {
					opts = append(opts, queue.WithDelay(time.Hour))
				}
				if _, err := q.Submit(ctx, nil, opts...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	t.Logf("submitted %d tasks in %v", total, time.Since(begin).Round(time.Millisecond))

	last := fmt.Sprintf("t%03d", tenants-1)
	want := map[queue.State][]string{}
	for i := tenants - 1; i < total; i += tenants {
		st := queue.StateWaiting
		if i/tenants%10 == 9 {
			st = queue.StateDelayed
		}
		want[st] = append(want[st], fmt.Sprintf("task-%06d", i))
	}
	require.Len(t, want[queue.StateWaiting], 3600)
	require.Len(t, want[queue.StateDelayed], 400)

	c, err := queue.NewClient(own.Client(), name)
	require.NoError(t, err)
	for _, st := range []queue.State{queue.StateWaiting, queue.StateDelayed} {
		begin := time.Now()
		tasks, err := c.TenantTasks(ctx, last, st, 0, 10_000)
		took := time.Since(begin)
		require.NoError(t, err, st)
		var got []string
		for _, tk := range tasks {
			assert.Equal(t, last, tk.Tenant)
			assert.Equal(t, st, tk.State)
			got = append(got, tk.ID)
		}
		sort.Strings(got)
		assert.Equal(t, want[st], got, "%s: exactly the tenant's tasks", st)
		t.Logf("TenantTasks(%s, %s) of %d: %v", last, st, len(got), took.Round(time.Microsecond))
	}

	// The pages: the first and the last of each list, 50 rows each, the
	// last page's rows what is left.
	_, base := serveRedis(t, own.Client())
	row := regexp.MustCompile(`<tr data-task="(task-\d+)">`)
	for _, st := range []queue.State{queue.StateWaiting, queue.StateDelayed} {
		n := len(want[st])
		lastPage := (n + listPageSize - 1) / listPageSize
		for _, page := range []int{1, lastPage} {
			begin := time.Now()
			code, body := get(t, fmt.Sprintf("%s/queue/%s/tasks?state=%s&tenant=%s&page=%d", base, name, st, last, page))
			took := time.Since(begin)
			require.Equal(t, http.StatusOK, code)
			assert.False(t, strings.Contains(body, `id="capped"`), "%s page %d: the list stopped early", st, page)
			rows := row.FindAllStringSubmatch(body, -1)
			wantRows := listPageSize
			if page == lastPage {
				wantRows = n - (lastPage-1)*listPageSize
			}
			assert.Len(t, rows, wantRows, "%s page %d", st, page)
			t.Logf("page %d of %s of tenant %s: %v", page, st, last, took.Round(time.Microsecond))
		}
	}
}
