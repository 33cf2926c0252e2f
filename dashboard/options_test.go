package dashboard

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
		"negative sample":       WithSampleEvery(-time.Second),
		"zero history":          WithHistory(0),
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
