package dashboard

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// TestTaskPageShowsProgress: the task page shows what its handler last
// reported (Task.Progress): value, message, attempt and time in UTC, and
// its JSON twin the same in the CLI's style; a task without a report
// shows none.
func TestTaskPageShowsProgress(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q, err := queue.Open(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	_, err = q.Serve(func(ctx context.Context, task *queue.Task) ([]byte, error) {
		if string(task.Payload) == "report" {
			if err := task.Progress(ctx, 42.5, "page <4> of 10"); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	require.NoError(t, err)
	for _, id := range []string{"report", "silent"} {
		f, err := q.Submit(ctx, []byte(id), queue.WithTaskID(id))
		require.NoError(t, err)
		_, err = f.Wait(ctx)
		require.NoError(t, err)
	}
	info, err := q.Inspect(ctx, "report")
	require.NoError(t, err)
	require.NotNil(t, info.Progress)
	_, base := serve(t)
	page := base + "/queue/" + q.Name() + "/task/"

	code, body := get(t, page+"report")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<dd id="progress"><b data-field="value">42.5</b> <span data-field="message">page &lt;4&gt; of 10</span> `+
		`<span class="meta">(attempt <span data-field="attempt">1</span>, at <span data-field="at">`+info.Progress.At.UTC().Format(timeFormat)+`</span>)</span></dd>`)
	code, body = get(t, page+"silent")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<dd id="progress">-</dd>`)

	v := twin(t, page+"report?format=json")
	assert.Equal(t, map[string]any{"value": 42.5, "message": "page <4> of 10", "attempt": 1.0,
		"at": info.Progress.At.UTC().Format(time.RFC3339Nano)}, jsonstyle.At(v, "task.progress"))
	v = twin(t, page+"silent?format=json")
	assert.Nil(t, jsonstyle.At(v, "task.progress"))
}
