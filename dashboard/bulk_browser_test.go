package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/queue"
)

// rowIDs reads the task ids of the list's rows.
const rowIDs = `Array.from(document.querySelectorAll('#tasks tbody tr')).map(tr => tr.dataset.task)`

// confirmAndFlash clicks a button, confirms, and reads the flash message
// and the address it lands on.
func confirmAndFlash(ctx context.Context, t *testing.T, button string) (flash, href string) {
	t.Helper()
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(button, chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#confirm", chromedp.ByQuery),
		chromedp.WaitVisible("#flash", chromedp.ByQuery),
		chromedp.Text("#flash", &flash, chromedp.ByQuery),
		chromedp.Location(&href),
	))
	return flash, href
}

func TestReplayingTwoSelectedDeadLetters(t *testing.T) {
	t.Parallel()
	q, _, failing := liveQueue(t, "d1", "d2", "d3")
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 40*time.Second)

	var ids []string
	var question string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/queue/"+q.Name()),
		chromedp.WaitVisible("#dead-bulk", chromedp.ByQuery),
		chromedp.Click("#dead-bulk", chromedp.ByQuery),
		chromedp.WaitVisible("#tasks", chromedp.ByQuery),
		chromedp.Evaluate(rowIDs, &ids),
		chromedp.Click(`#tasks tr[data-task="d1"] input[type=checkbox]`, chromedp.ByQuery),
		chromedp.Click(`#tasks tr[data-task="d3"] input[type=checkbox]`, chromedp.ByQuery),
		chromedp.Click("#replay-selected", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Text("#question", &question, chromedp.ByQuery),
	))
	assert.ElementsMatch(t, []string{"d1", "d2", "d3"}, ids)
	assert.Contains(t, question, "these 2 dead letters")
	assert.Contains(t, question, `"d1"`)
	assert.Contains(t, question, `"d3"`)
	assert.NotContains(t, question, `"d2"`)
	info, err := q.Inspect(ctx, "d1")
	require.NoError(t, err)
	assert.Equal(t, queue.StateDead, info.State, "nothing happens before the confirmation")

	failing.Store(false)
	var flash, href string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click("#confirm", chromedp.ByQuery),
		chromedp.WaitVisible("#flash", chromedp.ByQuery),
		chromedp.Text("#flash", &flash, chromedp.ByQuery),
		chromedp.Location(&href),
	))
	assert.Equal(t, "2 dead letters queued again.", flash)
	assert.Contains(t, href, "/tasks?state=dead", "back on the list")
	for _, id := range []string{"d1", "d3"} {
		require.Eventually(t, func() bool {
			res, err := q.Result(ctx, id)
			return err == nil && string(res) == "done"
		}, 10*time.Second, 20*time.Millisecond, "%s ran again and succeeded", id)
	}
	info, err = q.Inspect(ctx, "d2")
	require.NoError(t, err)
	assert.Equal(t, queue.StateDead, info.State, "the one not selected is still dead")
}

func TestCancellingSelectedWaitingTasks(t *testing.T) {
	t.Parallel()
	q := waitingQueue(t, 4, 0)
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 40*time.Second)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/queue/"+q.Name()),
		chromedp.WaitVisible("#list-waiting", chromedp.ByQuery),
		chromedp.Click("#list-waiting", chromedp.ByQuery),
		chromedp.WaitVisible("#tasks", chromedp.ByQuery),
		chromedp.Click(`#tasks tr[data-task="p-01"] input[type=checkbox]`, chromedp.ByQuery),
		chromedp.Click(`#tasks tr[data-task="p-03"] input[type=checkbox]`, chromedp.ByQuery),
	))
	flash, href := confirmAndFlash(ctx, t, "#cancel-selected")
	assert.True(t, strings.HasPrefix(flash, "2 tasks cancelled"), flash)
	assert.Contains(t, href, "/tasks?state=waiting")
	var ids []string
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(rowIDs, &ids)))
	assert.Equal(t, []string{"p-00", "p-02", hostileID}, ids, "the list no longer has them")
	for id, want := range map[string]queue.State{"p-00": queue.StateWaiting, "p-01": queue.StateCancelled, "p-02": queue.StateWaiting, "p-03": queue.StateCancelled} {
		info, err := q.Inspect(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, want, info.State, id)
	}

	// Select all, from the header: every row of the page.
	var checked int
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click("#select-all", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#tasks tbody input[type=checkbox]:checked').length`, &checked),
	))
	assert.Equal(t, 3, checked)
}

func TestTenantPagePauseAndResume(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t)
	ctx := tab(t, 40*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 2))
	_, base := serve(t, WithRefreshEvery(static))

	var title, state string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/queue/"+q.Name()),
		chromedp.WaitVisible(`#tenants tr[data-tenant="acme"] a`, chromedp.ByQuery),
		chromedp.Click(`#tenants tr[data-tenant="acme"] a`, chromedp.ByQuery),
		chromedp.WaitVisible("#tenant-id", chromedp.ByQuery),
		chromedp.Text("#tenant-id", &title, chromedp.ByQuery),
		chromedp.Text("#tenant-state", &state, chromedp.ByQuery),
	))
	assert.Equal(t, "acme", title)
	assert.Equal(t, "running", state)

	flash, href := confirmAndFlash(ctx, t, "#tenant-control button.pause")
	assert.Equal(t, "The tenant was paused.", flash)
	assert.Contains(t, href, "/queue/"+q.Name()+"/tenant/acme?done=tenant-paused", "back on the tenant's page")
	require.NoError(t, chromedp.Run(ctx, chromedp.Text("#tenant-state", &state, chromedp.ByQuery)))
	assert.Equal(t, "paused", state)

	// Paused: its task waits, while an untenanted one runs.
	f, err := q.Submit(ctx, []byte("x"), queue.WithTaskID("held"), queue.WithTenant("acme"))
	require.NoError(t, err)
	other, err := q.Submit(ctx, []byte("x"), queue.WithTaskID("free"))
	require.NoError(t, err)
	_, err = other.Wait(ctx)
	require.NoError(t, err)
	info, err := q.Inspect(ctx, "held")
	require.NoError(t, err)
	assert.Equal(t, queue.StateWaiting, info.State, "the paused tenant's task did not start")

	flash, _ = confirmAndFlash(ctx, t, "#tenant-control button.resume")
	assert.Equal(t, "The tenant was resumed.", flash)
	require.NoError(t, chromedp.Run(ctx, chromedp.Text("#tenant-state", &state, chromedp.ByQuery)))
	assert.Equal(t, "running", state)
	res, err := f.Wait(ctx)
	require.NoError(t, err, "resumed, its task runs")
	assert.Equal(t, "done", string(res))
}

func TestDoneListWithSearch(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t, "dead-1")
	ctx := tab(t, 40*time.Second)
	for _, id := range []string{"ok-1", "ok-2", "ok-3"} {
		f, err := q.Submit(ctx, []byte("x"), queue.WithTaskID(id))
		require.NoError(t, err)
		_, err = f.Wait(ctx)
		require.NoError(t, err)
	}
	_, base := serve(t, WithRefreshEvery(static))

	var ids []string
	var id, state, notFound string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/queue/"+q.Name()),
		chromedp.WaitVisible("#list-done", chromedp.ByQuery),
		chromedp.Click("#list-done", chromedp.ByQuery),
		chromedp.WaitVisible("#tasks", chromedp.ByQuery),
		chromedp.Evaluate(rowIDs, &ids),
		chromedp.SendKeys("#search-id", "ok-2", chromedp.ByQuery),
		chromedp.Click("#find", chromedp.ByQuery),
		chromedp.WaitVisible("#task", chromedp.ByQuery),
		chromedp.Text("#task-id", &id, chromedp.ByQuery),
		chromedp.Text("#state", &state, chromedp.ByQuery),
	))
	assert.Equal(t, []string{"ok-3", "ok-2", "ok-1"}, ids, "newest first")
	assert.Equal(t, "ok-2", id)
	assert.Equal(t, "done", state)

	// A dead letter is not in the done list: said so, with its page.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/queue/"+q.Name()+"/tasks?state=done"),
		chromedp.WaitVisible("#search-id", chromedp.ByQuery),
		chromedp.SendKeys("#search-id", "dead-1", chromedp.ByQuery),
		chromedp.Click("#find", chromedp.ByQuery),
		chromedp.WaitVisible("#not-found", chromedp.ByQuery),
		chromedp.Text("#not-found", &notFound, chromedp.ByQuery),
		chromedp.Click("#elsewhere", chromedp.ByQuery),
		chromedp.WaitVisible("#task", chromedp.ByQuery),
		chromedp.Text("#state", &state, chromedp.ByQuery),
	))
	assert.Contains(t, notFound, `"dead-1" is not in this list: it is dead`)
	assert.Equal(t, "dead", state)
}
