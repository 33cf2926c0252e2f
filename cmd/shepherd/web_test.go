package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/dashboard"
	"github.com/shepherd-go/shepherd/pool"
)

func TestJobsShowsOneJob(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 2, 3)
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"jobs", "-redis", srv.Addr(), "-pool", name, "key-b"}, &out, &errOut), errOut.String())
	info, err := n.Job(t.Context(), "key-b")
	require.NoError(t, err)
	s := out.String()
	assert.Contains(t, s, "key-b")
	assert.Contains(t, s, "running for")
	assert.Contains(t, s, info.Worker+" (ok)")
	assert.Contains(t, s, "attempt:")

	out.Reset()
	require.Equal(t, exitOK, run([]string{"jobs", "-redis", srv.Addr(), "-pool", name, "-json", "key-c"}, &out, &errOut), errOut.String())
	var got pool.JobInfo
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	assert.Equal(t, "key-c", got.Key)
	assert.Equal(t, pool.JobRunning, got.State)

	errOut.Reset()
	assert.Equal(t, exitError, run([]string{"jobs", "-redis", srv.Addr(), "-pool", name, "nope"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "job not found")
	errOut.Reset()
	assert.Equal(t, exitError, run([]string{"jobs", "-redis", srv.Addr(), "-pool", name + "-typo", "key-a"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "not found")
	assert.Equal(t, exitUsage, run([]string{"jobs", "-redis", srv.Addr(), "-pool", name, "a", "b"}, &out, &errOut))
}

func TestPoolsListsPoolsAndQueues(t *testing.T) {
	t.Parallel()
	poolName, _, _ := livePool(t, 1, 2)
	queueName, _, _ := openQueue(t)
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"pools", "-redis", srv.Addr(), "-json"}, &out, &errOut), errOut.String())
	var l dashboard.Listing
	require.NoError(t, json.Unmarshal(out.Bytes(), &l))
	var p *dashboard.PoolRow
	for i := range l.Pools {
		if l.Pools[i].Name == poolName {
			p = &l.Pools[i]
		}
	}
	require.NotNil(t, p, "the pool is listed")
	assert.Equal(t, 2, p.Jobs)
	assert.Equal(t, 1, p.WorkersHealthy)
	assert.Equal(t, "ok", p.Health)
	found := false
	for _, q := range l.Queues {
		found = found || q.Name == queueName
	}
	assert.True(t, found, "the queue is listed")

	out.Reset()
	require.Equal(t, exitOK, run([]string{"pools", "-redis", srv.Addr()}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), poolName)
	assert.Contains(t, out.String(), queueName)
}

func TestWebRefusesAnOpenAddressWithoutAToken(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run([]string{"web", "-redis", srv.Addr(), "-listen", "0.0.0.0:0", "-token="}, &out, &errOut)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut.String(), "not a loopback address: set -token")
	assert.Contains(t, errOut.String(), "-readonly", "it names the other way")
	errOut.Reset()
	assert.Equal(t, exitUsage, run([]string{"web", "-redis", srv.Addr(), "-listen", "nonsense"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-listen")
}

// startWeb runs the web command with args (not in parallel: it sets the
// command's test hooks) and returns the address it listens on, and a stop
// that ends it and returns its exit code, stdout and stderr.
func startWeb(t *testing.T, args ...string) (string, func() (int, string, string)) {
	t.Helper()
	ready, stop, done := make(chan string, 1), make(chan struct{}), make(chan int, 1)
	webReady, webStop = func(addr string) { ready <- addr }, stop
	t.Cleanup(func() { webReady, webStop = nil, nil })
	var out, errOut bytes.Buffer
	go func() {
		done <- run(append([]string{"web", "-redis", srv.Addr()}, args...), &out, &errOut)
	}()
	var addr string
	select {
	case addr = <-ready:
	case code := <-done:
		t.Fatalf("web exited with %d: %s", code, errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("web did not start")
	}
	return addr, func() (int, string, string) {
		t.Helper()
		close(stop)
		select {
		case code := <-done:
			return code, out.String(), errOut.String()
		case <-time.After(10 * time.Second):
			t.Fatal("web did not stop")
			return 0, "", ""
		}
	}
}

// -readonly on an address other than loopback is allowed without a
// token, with a warning that anyone who reaches it can read everything;
// and a wildcard listen address is printed as a URL a person can click.
func TestWebReadOnlyOnAnOpenAddress(t *testing.T) {
	name, _, _ := livePool(t, 1, 2)
	addr, stop := startWeb(t, "-listen", "0.0.0.0:0", "-readonly", "-token=")
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	local := "http://127.0.0.1:" + port + "/"
	resp, err := http.Get(local + "pool/" + name + "?format=json")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "no token is asked for")
	resp, err = http.Post(local+"pool/"+name+"/shutdown", "application/x-www-form-urlencoded", strings.NewReader("confirm=yes"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "-readonly")
	code, out, errOut := stop()
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, "WARNING")
	assert.Contains(t, errOut, "anyone who reaches it can read every pool and queue")
	assert.Contains(t, out, "serving "+local+" ", "the URL printed is one a browser opens")
	assert.NotContains(t, out, "[::]")
	assert.NotContains(t, out, "0.0.0.0")
	if host, err := os.Hostname(); err == nil && host != "" {
		assert.Contains(t, out, "from another machine: http://"+net.JoinHostPort(host, port)+"/")
	}
	assert.Contains(t, out, "read-only")
}

// With a token, the startup line says how to open the dashboard with it,
// at a clickable URL, and never prints the token itself.
func TestWebPrintsAClickableTokenURL(t *testing.T) {
	_, stop := startWeb(t, "-listen", "0.0.0.0:0", "-token", "s3cret-tok")
	code, out, errOut := stop()
	assert.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `serving http://127\.0\.0\.1:\d+/ .*; open http://127\.0\.0\.1:\d+/\?token=YOUR-TOKEN once`, out)
	assert.NotContains(t, out, "s3cret-tok")
	assert.NotContains(t, errOut, "WARNING", "a token: no warning")
}

// TestWebServesTheDashboard runs the command itself (not in parallel: it
// sets the command's test hooks).
func TestWebServesTheDashboard(t *testing.T) {
	name, _, _ := livePool(t, 1, 2)
	addr, stop := startWeb(t, "-listen", "127.0.0.1:0", "-readonly")
	resp, err := http.Get("http://" + addr + "/pool/" + name + "?format=json")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Contains(t, string(body), `"jobs": 2`)
	resp, err = http.Post("http://"+addr+"/pool/"+name+"/shutdown", "application/x-www-form-urlencoded", strings.NewReader("confirm=yes"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "-readonly")
	code, out, errOut := stop()
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "serving http://"+addr+"/")
	assert.Contains(t, out, "read-only")
	assert.NotContains(t, errOut, "WARNING", "loopback: no warning")
}
