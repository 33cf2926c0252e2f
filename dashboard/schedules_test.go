package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/queue"
)

// The queue page lists the schedules with their next and last ticks, and
// runs one now after a confirmation; read-only, it offers no form and
// refuses the action.
func TestQueuePageSchedules(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t)
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, q.SetSchedule(ctx, "hourly <b>", "@hourly", nil, queue.WithTimeZone("Europe/Paris"), queue.WithNoOverlap()))
	require.NoError(t, q.SetSchedule(ctx, "beat", "@every 1s", nil))
	d, base := serve(t)
	page := base + "/queue/" + url.PathEscape(q.Name())

	// The second schedule ticks: its last tick and task show.
	require.Eventually(t, func() bool {
		code, body := get(t, page)
		return code == http.StatusOK && strings.Contains(body, `<td data-field="result">queued</td>`)
	}, 10*time.Second, 50*time.Millisecond, "the page shows no tick of beat")
	code, body := get(t, page)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `data-schedule="hourly &lt;b&gt;"`, "the name is escaped")
	assert.Contains(t, body, "@hourly (Europe/Paris)")
	assert.Contains(t, body, "beat@")
	assert.Contains(t, body, `class="run-schedule"`)

	v := twin(t, page+"?format=json")
	all, err := q.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, jsonstyle.At(v, "schedules"), 2)
	assert.Equal(t, "beat", jsonstyle.At(v, "schedules.0.name"))
	assert.NotNil(t, jsonstyle.At(v, "schedules.0.last_tick"))
	assert.Equal(t, "hourly <b>", jsonstyle.At(v, "schedules.1.name"))
	assert.Equal(t, styled(t, all[1].Created.Truncate(time.Hour).Add(time.Hour)), jsonstyle.At(v, "schedules.1.next"))

	form := "schedule=" + url.QueryEscape("hourly <b>") + "&csrf=" + d.csrfToken()
	code, body = post(t, page+"/schedule/run", form)
	require.Equal(t, http.StatusOK, code, "a confirmation first")
	assert.Contains(t, body, "Run schedule")
	all, err = q.Schedules(ctx)
	require.NoError(t, err)
	assert.Empty(t, all[1].LastTaskID, "run before the confirmation")
	resp, _ := request(t, http.MethodPost, page+"/schedule/run", form+"&confirm=yes")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.True(t, strings.HasSuffix(resp.Header.Get("Location"), "?done=schedule-run"), resp.Header.Get("Location"))
	all, err = q.Schedules(ctx)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(all[1].LastTaskID, "hourly <b>@now-"), all[1].LastTaskID)

	code, _ = post(t, page+"/schedule/run", "schedule=nope&confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = post(t, page+"/schedule/run", "confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusBadRequest, code)

	ro, roBase := serve(t, WithReadOnly(true))
	roPage := roBase + "/queue/" + url.PathEscape(q.Name())
	code, body = get(t, roPage)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `data-schedule="beat"`)
	assert.NotContains(t, body, `class="run-schedule"`)
	code, _ = post(t, roPage+"/schedule/run", "schedule=beat&confirm=yes&csrf="+ro.csrfToken())
	assert.Equal(t, http.StatusForbidden, code)
}
