package dashboard

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewChecksItsOptions(t *testing.T) {
	t.Parallel()
	var nilClient *redis.Client
	for _, rdb := range []redis.UniversalClient{nil, nilClient} {
		_, err := New(rdb)
		assert.ErrorIs(t, err, ErrInvalidOption)
		assert.ErrorContains(t, err, "nil Redis client")
	}
	for name, opt := range map[string]Option{
		"nil option":            nil,
		"nil logger":            WithLogger(nil),
		"zero refresh":          WithRefreshEvery(0),
		"negative timeout":      WithActionTimeout(-1),
		"empty host":            WithAllowedHosts("ops.example.com", ""),
		"host with a path":      WithAllowedHosts("ops.example.com/x"),
		"relative prefix":       WithPrefix("ops/shepherd"),
		"empty segment":         WithPrefix("/ops//shepherd"),
		"dot-dot segment":       WithPrefix("/ops/../shepherd"),
		"a space":               WithPrefix("/ops/shep herd"),
		"a pattern wildcard":    WithPrefix("/ops/{x}"),
		"an escape":             WithPrefix("/ops/%2F"),
		"a query":               WithPrefix("/ops?x=1"),
		"only slashes":          WithPrefix("//"),
		"a method in a pattern": WithPrefix("GET /ops"),
		"a short CSRF key":      WithCSRFKey(make([]byte, MinCSRFKeySize-1)),
	} {
		_, err := New(srv.Client(), opt)
		assert.ErrorIs(t, err, ErrInvalidOption, name)
	}
}

func TestPrefixIsCleaned(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                "",
		"/":               "",
		"/ops":            "/ops",
		"/ops/":           "/ops",
		"/ops/shepherd/":  "/ops/shepherd",
		"/a-b.c_d~e/f9":   "/a-b.c_d~e/f9",
		"/Ops/Shepherd-2": "/Ops/Shepherd-2",
	} {
		got, err := cleanPrefix(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}

// Replicas given one CSRF key accept each other's forms; without it each
// handler keys its own, and a form from one is refused by another.
func TestReplicasShareTheCSRFKey(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q, err := queue.Open(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(ctx) })
	key := []byte("a key of at least thirty-two bytes, random in production")
	a, _ := serve(t, WithCSRFKey(key))
	_, baseB := serve(t, WithCSRFKey(key))
	loner, _ := serve(t)
	page := baseB + "/queue/" + url.PathEscape(q.Name())
	code, body := post(t, page+"/pause", "confirm=yes&csrf="+loner.csrfToken())
	assert.Equal(t, http.StatusForbidden, code, "a form keyed by another handler: %s", body)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.False(t, st.Paused)
	code, body = post(t, page+"/pause", "confirm=yes&csrf="+a.csrfToken())
	assert.Less(t, code, 400, "a form from a replica with the same key: %s", body)
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	assert.True(t, st.Paused, "the replica's form acted")
}
