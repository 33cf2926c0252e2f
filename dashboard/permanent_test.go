package dashboard

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// TestPermanentDeadLettersMarked: a dead letter of queue.Permanent is
// marked "permanent" on the queue page, in the dead letters' list and on
// its task page; one that used up its attempts is not.
func TestPermanentDeadLettersMarked(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q, err := queue.Open(ctx, srv.Client(), name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	_, err = q.Serve(func(ctx context.Context, task *queue.Task) ([]byte, error) {
		if string(task.Payload) == "perm" {
			return nil, queue.Permanent(errors.New("bad input"))
		}
		return nil, errors.New("soft")
	}, queue.WithWorkers(2))
	require.NoError(t, err)
	for id, attempts := range map[string]int{"perm": 3, "soft": 1} {
		f, err := q.Submit(ctx, []byte(id), queue.WithTaskID(id), queue.WithMaxAttempts(attempts))
		require.NoError(t, err)
		<-f.Done()
	}
	_, base := serve(t)
	row := func(body, id string) string {
		return regexp.MustCompile(`(?s)<tr data-task="` + id + `">.*?</tr>`).FindString(body)
	}
	for _, path := range []string{"/queue/" + name, "/queue/" + name + "/tasks?state=dead"} {
		code, body := get(t, base+path)
		require.Equal(t, http.StatusOK, code, body)
		assert.Regexp(t, `data-field="attempts"><span class="badge bad permanent"[^>]*>permanent</span> 1 / 3</td>`, row(body, "perm"), path)
		assert.Contains(t, row(body, "soft"), `data-field="attempts">1 / 1</td>`, path)
		assert.NotContains(t, row(body, "soft"), "permanent", path)
	}
	_, body := get(t, base+"/queue/"+name+"/task/perm")
	assert.Contains(t, body, `id="permanent"`)
	_, body = get(t, base+"/queue/"+name+"/task/soft")
	assert.NotContains(t, body, `id="permanent"`)
}
