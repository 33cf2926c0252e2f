package dashboard

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/pool"
)

type onePlan struct{}

func (onePlan) Name() string { return "devices" }
func (onePlan) Plan(context.Context) (*pool.JobPlan, error) {
	return &pool.JobPlan{Jobs: []pool.PlannedJob{{Key: "d1"}, {Key: "d2"}, {Key: ""}}}, nil
}

func TestPoolPageShowsSchedulesAndTickers(t *testing.T) {
	t.Parallel()
	name, node, _ := livePool(t, 1)
	ctx := testCtx(t, 30*time.Second)
	d, base := serve(t)
	code, body := get(t, base+"/pool/"+name)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="schedules-none"`)
	assert.Contains(t, body, `id="tickers-none"`)

	require.NoError(t, node.Schedule(ctx, onePlan{}, time.Hour))
	tk, err := node.NewTicker(ctx, "beat", time.Hour)
	require.NoError(t, err)
	defer tk.Stop()
	require.Eventually(t, func() bool {
		st, err := pool.Inspect(ctx, srv.Client(), name)
		return err == nil && len(st.Schedules) == 1 && st.Schedules[0].Failed == 1 && len(st.Tickers) == 1 && st.Tickers[0].Holder != ""
	}, 10*time.Second, 5*time.Millisecond)

	code, body = get(t, base+"/pool/"+name)
	require.Equal(t, http.StatusOK, code, body)
	row := regexpFind(`(?s)<tr data-schedule="devices">(.*?)</tr>`, body)
	require.NotEmpty(t, row, body)
	assert.Contains(t, row, `title="node `+node.ID()+`"`, "the planner")
	assert.Regexp(t, `data-field="started">2<`, row)
	assert.Regexp(t, `data-field="failed"><span class="badge bad">1<`, row)
	assert.Contains(t, row, "invalid job key", "the failed key's error")
	ticker := regexpFind(`(?s)<tr data-ticker="beat">(.*?)</tr>`, body)
	require.NotEmpty(t, ticker, body)
	assert.Contains(t, ticker, `title="node `+node.ID()+`"`, "the holder")

	// Removing asks first, then removes for every node.
	code, body = post(t, base+"/pool/"+name+"/unschedule", "name=devices&csrf="+d.csrfToken())
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "Remove schedule")
	st, err := pool.Inspect(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.Len(t, st.Schedules, 1, "nothing happens before the confirmation")
	assert.Equal(t, "/pool/"+name+"?done=unscheduled", actOn(t, d, base+"/pool/"+name+"/unschedule", "name=devices"))
	assert.Equal(t, "/pool/"+name+"?done=ticker-stopped", actOn(t, d, base+"/pool/"+name+"/stop-ticker", "name=beat"))
	st, err = pool.Inspect(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.Empty(t, st.Schedules)
	assert.Empty(t, st.Tickers)
	assert.Equal(t, "The schedule was removed.", flashOf(t, base, "/pool/"+name+"?done=unscheduled"))

	// A name that is not there: 404.
	resp, body := request(t, http.MethodPost, base+"/pool/"+name+"/stop-ticker", "name=beat&confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	resp, body = request(t, http.MethodPost, base+"/pool/"+name+"/unschedule", "confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
}

func TestPoolPageShowsARestartingNode(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 1)
	ctx := testCtx(t, 30*time.Second)
	n, err := pool.AddNode(ctx, srv.Client(), name, pool.WithWorkerTTL(2*time.Second), pool.WithNodeID("web-0"))
	require.NoError(t, err)
	w, err := n.AddWorker(ctx, newJobs())
	require.NoError(t, err)
	require.NoError(t, n.Close(ctx))
	_, base := serve(t)
	code, body := get(t, base+"/pool/"+name)
	require.Equal(t, http.StatusOK, code, body)
	row := regexpFind(`(?s)<tr data-worker="`+w.ID()+`"[^>]*>(.*?)</tr>`, body)
	require.NotEmpty(t, row, body)
	assert.Contains(t, row, `data-field="restarting"`)
	assert.NotContains(t, row, "badge bad")
}
