package main

import (
	"bytes"
	"testing"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "-pool is required"},
		{[]string{"status", "-pool", "p", "-interval", "0s"}, "must be positive"},
		{[]string{"status", "-pool", "p", "extra"}, "unexpected arguments"},
		{[]string{"status", "-nope"}, "unknown flag: --nope"},
		{[]string{"jobs"}, "-pool is required"},
		{[]string{"dispatch", "-pool", "p"}, "missing job key"},
		{[]string{"notify", "-pool", "p"}, "missing job key"},
		{[]string{"stop", "-pool", "p", "-yes"}, "missing job key"},
		{[]string{"stop", "k"}, "-pool is required"},
		{[]string{"shutdown", "-pool", "p", "-timeout", "-1s"}, "-timeout must be positive"},
		{[]string{"demo", "-nodes", "1"}, "-nodes must be at least 2"},
		{[]string{"demo", "-jobs", "0"}, "must be at least 1"},
		{[]string{"demo", "-ttl", "0s"}, "-ttl must be positive"},
		{[]string{"demo", "-redis", "redis://host:6379/notanumber"}, "-redis"},
		{[]string{"status", "-pool", "p", "-redis", "http://host"}, "-redis"},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut.String())
		assert.Contains(t, errOut.String(), tc.want, "%v", tc.args)
	}
}

func TestRedisURLWithPassword(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithPassword("s3cret"))
	var out, errOut bytes.Buffer
	code := run([]string{"status", "-redis", "redis://:s3cret@" + s.Addr() + "/0", "-pool", "p", "-json"}, &out, &errOut)
	assert.Equal(t, exitError, code, errOut.String())
	assert.Contains(t, jsonError(t, "status -json", errOut.String()), `pool "p" not found`, "authenticated, then found no pool")
	errOut.Reset()
	code = run([]string{"status", "-redis", "redis://:wrong@" + s.Addr(), "-pool", "p"}, &out, &errOut)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut.String(), "WRONGPASS")
}

func TestRedisOptions(t *testing.T) {
	t.Parallel()
	opt, err := redisOptions("rediss://user:pw@example.com:6380/2")
	require.NoError(t, err)
	assert.Equal(t, "example.com:6380", opt.Addr)
	assert.Equal(t, "user", opt.Username)
	assert.Equal(t, "pw", opt.Password)
	assert.Equal(t, 2, opt.DB)
	assert.NotNil(t, opt.TLSConfig, "rediss:// means TLS")
	opt, err = redisOptions("")
	require.NoError(t, err)
	assert.Equal(t, "localhost:6379", opt.Addr)
}
