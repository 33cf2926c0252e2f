package dashboard

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/queue"
)

// twin fetches a page's JSON twin, checks that it is in the CLI's style
// (snake_case keys, no duration in a unit other than ms, times RFC 3339
// in UTC) and returns it decoded.
func twin(t *testing.T, url string) any {
	t.Helper()
	code, body := get(t, url)
	require.Equal(t, http.StatusOK, code, body)
	v, bad, err := jsonstyle.Violations([]byte(body))
	require.NoError(t, err, body)
	assert.Empty(t, bad, "%s: not in the JSON style", url)
	return v
}

// styled is v as the JSON style writes it, decoded: what a twin holds
// for a value of the library.
func styled(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(jsonstyle.Value(v))
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// TestJSONTwinsInTheCLIStyle: every page's JSON twin is in the CLI's
// style: snake_case keys, durations in ms under keys ending in _ms,
// times RFC 3339 in UTC, a rate as {"n","per_ms","burst"}.
func TestJSONTwinsInTheCLIStyle(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 2, keysN("j", 3)...)
	q, _, _ := liveQueue(t, "dead-a")
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, q.SetRate(ctx, queue.Rate{N: 500, Per: time.Second}))
	require.NoError(t, q.SetTenant(ctx, "acme", 2))
	_, base := serve(t)
	qp := base + "/queue/" + q.Name()

	v := twin(t, qp+"?format=json")
	assert.Equal(t, map[string]any{"n": 500.0, "per_ms": 1000.0, "burst": 10.0}, jsonstyle.At(v, "stats.rate"))
	assert.Contains(t, jsonstyle.At(v, "stats").(map[string]any), "in_flight")
	assert.Contains(t, jsonstyle.At(v, "dead.0").(map[string]any), "max_attempts")
	assert.Contains(t, jsonstyle.At(v, "dead.0").(map[string]any), "timeout_ms")
	assert.Regexp(t, `Z$`, jsonstyle.At(v, "dead.0.finished"))
	assert.Equal(t, 10000.0, jsonstyle.At(v, "step_ms"))
	v = twin(t, qp+"/task/dead-a?format=json")
	assert.Equal(t, "dead-a", jsonstyle.At(v, "task.id"))
	twin(t, qp+"/tasks?state=dead&format=json")
	twin(t, base+"/?format=json")
	v = twin(t, base+"/pool/"+name+"?format=json")
	assert.Contains(t, jsonstyle.At(v, "stats").(map[string]any), "worker_ttl_ms")
	twin(t, base+"/pool/"+name+"/job/j-01?format=json")
	twin(t, base+"/pool/"+name+"/jobs?format=json")
}
