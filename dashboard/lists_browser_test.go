package dashboard

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFromAQueuesCountToATask(t *testing.T) {
	t.Parallel()
	q := waitingQueue(t, 55, 0)
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	var first, second []string
	var id, state string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/queue/"+q.Name()),
		chromedp.WaitVisible("#list-waiting", chromedp.ByQuery),
		chromedp.Click("#list-waiting", chromedp.ByQuery),
		chromedp.WaitVisible("#tasks", chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#tasks tbody tr')).map(tr => tr.dataset.task)`, &first),
		chromedp.Click("#next", chromedp.ByQuery),
		chromedp.WaitVisible("#prev", chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#tasks tbody tr')).map(tr => tr.dataset.task)`, &second),
		chromedp.Click(`#tasks tr[data-task="p-52"] a`, chromedp.ByQuery),
		chromedp.WaitVisible("#task", chromedp.ByQuery),
		chromedp.Text("#task-id", &id, chromedp.ByQuery),
		chromedp.Text("#state", &state, chromedp.ByQuery),
	))
	require.Len(t, first, 50)
	assert.Equal(t, "p-00", first[0])
	assert.Equal(t, []string{"p-50", "p-51", "p-52", "p-53", "p-54", hostileID}, second)
	assert.Equal(t, "p-52", id)
	assert.Equal(t, "waiting", state)
}

func TestAWorkersMoreLinksItsJobs(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 1, keysN("m", 12)...)
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.Workers, 1)
	var keys []string
	var worker, more string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name),
		chromedp.WaitVisible("#workers a.more", chromedp.ByQuery),
		chromedp.Text("#workers a.more", &more, chromedp.ByQuery),
		chromedp.Click("#workers a.more", chromedp.ByQuery),
		chromedp.WaitVisible("#jobs", chromedp.ByQuery),
		chromedp.Text("#worker", &worker, chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#jobs tbody tr')).map(tr => tr.dataset.job)`, &keys),
	))
	assert.Equal(t, "and 4 more", more)
	assert.Equal(t, st.Workers[0].ID, worker)
	assert.Equal(t, keysN("m", 12), keys)
}
