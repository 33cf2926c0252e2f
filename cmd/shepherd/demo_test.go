package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemoEndToEnd(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	pool := redistest.Name(t)
	code := run([]string{"demo", "-redis", srv.Addr(), "-pool", pool,
		"-jobs", "150", "-nodes", "3", "-workers", "2", "-ttl", "1s"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	s := out.String()
	for _, want := range []string{
		"Redis: given by -redis",
		"started node3",
		"150/150",
		"jobs per worker:",
		"crashing node3",
		"simulated in-process",
		"declared node3's workers dead",
		"running 150/150 on live workers",
		"verified: all 150 jobs run",
		"summary",
		"dispatched: 150 jobs in",
		"recovery:   all",
		"lost:       0 of 150",
		"left behind: nothing",
	} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "removed on exit", "the demo started no Redis: it removes none")
	assert.Empty(t, errOut.String())
	left, err := srv.Client().Keys(context.Background(), "shepherd:{"+pool+"}:*").Result()
	require.NoError(t, err)
	assert.Empty(t, left, "the demo leaves no key behind")
}

func TestDemoHelpListsKnobs(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, run([]string{"demo", "-h"}, &out, &errOut))
	for _, knob := range []string{"-jobs", "-nodes", "-workers", "-ttl", "-redis"} {
		assert.Contains(t, out.String(), knob)
	}
}

func TestDemoStartsAPrivateRedisServer(t *testing.T) {
	t.Parallel()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := startRedisServer(ctx, path)
	require.NoError(t, err)
	assert.True(t, answers(ctx, r.addr))
	assert.Contains(t, r.origin, "private redis-server")
	require.NoError(t, r.release())
	assert.False(t, answers(ctx, r.addr), "the server is gone")
	_, err = os.Stat(r.dir)
	assert.True(t, os.IsNotExist(err), "the data directory %s is removed", r.dir)
}

// Without -redis or $REDIS_ADDR the demo starts a private redis-server:
// it never writes to whatever answers on localhost:6379.
func TestDemoDefaultsToAPrivateRedis(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var log bytes.Buffer
	r, err := findRedis(ctx, "", &log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.release() })
	assert.True(t, r.private)
	assert.Contains(t, r.origin, "private redis-server")
	assert.NotEqual(t, "localhost:6379", r.addr)
	assert.NotContains(t, log.String(), "localhost:6379", "localhost:6379 is not even asked")
	assert.True(t, answers(ctx, r.addr))

	given, err := findRedis(ctx, srv.Addr(), &log)
	require.NoError(t, err)
	assert.False(t, given.private, "a given Redis is not the demo's to remove")
	assert.Equal(t, srv.Addr(), given.addr)
}

// The whole demo on its private Redis says that it removes it.
func TestDemoOnAPrivateRedis(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server binary")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"demo", "-redis=", "-jobs", "40", "-nodes", "2", "-workers", "2", "-ttl", "1s"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	s := out.String()
	assert.Contains(t, s, "Redis: a private redis-server")
	assert.Contains(t, s, "the private Redis the demo started is removed on exit")
	assert.NotContains(t, s, "localhost:6379")
}

func TestDemoQueueEndToEnd(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	name := redistest.Name(t)
	code := run([]string{"demo", "queue", "-redis", srv.Addr(), "-queue", name, "-tasks", "120", "-workers", "2", "-ttl", "1s"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	s := out.String()
	for _, want := range []string{
		"started serving process B",
		"submitted 120 tasks",
		"crashing process B (SIGKILL)",
		"were done by A",
		"succeeded:   119 tasks",
		"dead letter: 1",
		`task-0040 "malformed": malformed payload`,
		"lost:        0 of 120",
		"left behind: nothing",
	} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "removed on exit", "the demo started no Redis: it removes none")
	left, err := srv.Client().Keys(context.Background(), "shepherd:{"+name+"}:*").Result()
	require.NoError(t, err)
	assert.Empty(t, left, "the demo leaves no key behind")
}
