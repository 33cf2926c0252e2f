package dashboard

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// TestProcessNames: a queue's serving process named in code shows as
// "name (host:pid)", its id in the title; a process without a name as
// "host:pid"; a process that only submits is listed apart, as a
// submit-only client, and the overview counts it apart too. A pool's
// named node shows the same way in its nodes' table and as its workers'
// node.
func TestProcessNames(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	host, _ := os.Hostname()
	where := fmt.Sprintf("%s:%d", host, os.Getpid())
	name := redistest.Name(t)

	serving, err := queue.Open(ctx, srv.Client(), name, queue.WithName("api-3"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = serving.Close(context.Background()) })
	_, err = serving.Serve(func(ctx context.Context, task *queue.Task) ([]byte, error) { return nil, nil }, queue.WithWorkers(2))
	require.NoError(t, err)
	anon, err := queue.Open(ctx, srv.Client(), name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = anon.Close(context.Background()) })
	_, err = anon.Serve(func(ctx context.Context, task *queue.Task) ([]byte, error) { return nil, nil }, queue.WithWorkers(1))
	require.NoError(t, err)
	submitter, err := queue.Open(ctx, srv.Client(), name, queue.WithName("cron-submitter"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = submitter.Close(context.Background()) })

	c, err := queue.NewClient(srv.Client(), name)
	require.NoError(t, err)
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	ids := map[string]string{}
	for _, p := range st.Processes {
		ids[p.Name] = p.ID
		assert.Equal(t, p.Name == "cron-submitter", p.SubmitOnly(), "%q", p.Name)
	}
	require.Len(t, ids, 3)

	_, base := serve(t)
	code, body := get(t, base+"/queue/"+name)
	require.Equal(t, http.StatusOK, code, body)
	body = html.UnescapeString(body)
	table := regexp.MustCompile(`(?s)<table class="grid" id="processes">.*?</table>`).FindString(body)
	require.NotEmpty(t, table)
	assert.Contains(t, table, `title="process `+ids["api-3"]+`">api-3 (`+where+`)</td>`)
	assert.Contains(t, table, `title="process `+ids[""]+`">`+where+`</td>`)
	assert.NotContains(t, table, "cron-submitter", "a submit-only process is not among those serving")
	clients := regexp.MustCompile(`(?s)<p class="meta" id="clients">.*?</p>`).FindString(body)
	assert.Contains(t, clients, `data-process="`+ids["cron-submitter"]+`"`)
	assert.Contains(t, clients, "cron-submitter ("+where+")")
	assert.Contains(t, body, "Submit-only clients (1)")

	_, body = get(t, base+"/?format=json")
	assert.Regexp(t, `"name": "`+regexp.QuoteMeta(name)+`",\s*"processes": 2,\s*"clients": 1,`, body)

	// A pool's node.
	pname := redistest.Name(t) + "-pool"
	n, err := pool.AddNode(ctx, srv.Client(), pname, pool.WithName("ingest-2"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	_, err = n.AddWorker(ctx, newJobs())
	require.NoError(t, err)
	ps, err := n.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, ps.Nodes, 1)
	assert.Equal(t, "ingest-2", ps.Nodes[0].Name)
	_, body = get(t, base+"/pool/"+pname)
	body = html.UnescapeString(body)
	label := "ingest-2 (" + where + ")"
	assert.Contains(t, body, `<td data-field="name" title="node `+n.ID()+`">`+label+`</td>`)
	assert.Contains(t, body, `<td data-field="node" title="node `+n.ID()+`">`+label+`</td>`)
}

func TestProcLabel(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "api (h:7)", procLabel("id", "api", "h", 7))
	assert.Equal(t, "h:7", procLabel("id", "", "h", 7))
	assert.Equal(t, "api", procLabel("id", "api", "", 0))
	assert.Equal(t, "id", procLabel("id", "", "", 0))
}
