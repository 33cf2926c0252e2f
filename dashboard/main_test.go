package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

var srv *redistest.Server

// browser is one headless Chromium shared by the package's tests; each
// test opens its own tab, one test at a time (use holds it): tabs driven
// at once in one headless browser stall, as a tab in the background is
// not rendered.
var browser struct {
	use     sync.Mutex
	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	missing error // no browser found: the test skips, or fails (withoutBrowser)
	err     error // the browser would not start: the test fails
}

// TestMain starts a private Redis, runs the tests, closes the browser and
// Redis, and checks that no goroutine outlived them.
func TestMain(m *testing.M) {
	s, err := redistest.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv = s
	if _, err := chromiumPath(); err != nil {
		// One line for the package, whose tests each skip (or fail).
		if skip, why := withoutBrowser(err, os.Getenv(requireBrowser)); skip {
			fmt.Fprintln(os.Stderr, "dashboard:", why)
		}
	}
	disarm := redistest.Watchdog(func() { _ = s.Close() })
	code := m.Run()
	disarm()
	if browser.cancel != nil {
		browser.cancel()
	}
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// chromiumPath finds Debian's chromium (CI installs it), or the browser
// SHEPHERD_CHROMIUM names.
func chromiumPath() (string, error) {
	for _, name := range []string{os.Getenv("SHEPHERD_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New(noChromium)
}

// noChromium says what to do when there is no browser.
const noChromium = "no chromium found: install it (Debian's chromium package; .ci/run does) or set SHEPHERD_CHROMIUM to a Chrome or Chromium binary"

// requireBrowser names the variable that turns the browser tests' skip,
// when there is no browser, into a failure (.ci/run sets it: CI never
// skips them).
const requireBrowser = "SHEPHERD_REQUIRE_BROWSER"

// withoutBrowser tells what a browser test does when the browser cannot
// be found (err) and the environment's requireBrowser is required: fail
// (with err) when it is set, else skip, saying how to run it.
func withoutBrowser(err error, required string) (skip bool, why string) {
	if required != "" {
		return false, fmt.Sprintf("%v (%s is set: the browser tests must run)", err, requireBrowser)
	}
	return true, fmt.Sprintf("browser tests skipped: %v; %s=1 makes this a failure", err, requireBrowser)
}

// tab opens a browser tab for the test, closed at its end; every action
// in it must finish within d.
func tab(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	browser.once.Do(func() {
		path, err := chromiumPath()
		if err != nil {
			browser.missing = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
			chromedp.WindowSize(1280, 900))
		actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelB := chromedp.NewContext(actx)
		if err := chromedp.Run(bctx); err != nil { // starts the browser
			cancelB()
			cancelA()
			browser.err = fmt.Errorf("starting %s: %w", path, err)
			return
		}
		browser.ctx = bctx
		browser.cancel = func() { cancelB(); cancelA() }
	})
	if browser.missing != nil {
		skip, why := withoutBrowser(browser.missing, os.Getenv(requireBrowser))
		if skip {
			t.Skip("no chromium: see the package's first line") // TestMain's, why
		}
		t.Fatal(why)
	}
	require.NoError(t, browser.err) // found, but it would not start
	browser.use.Lock()
	t.Cleanup(browser.use.Unlock)
	ctx, cancel := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, d)
	t.Cleanup(cancelT)
	// Tabs share the browser's cookies (and cookies ignore ports): no
	// cookie, the token's, is left from an earlier test or an earlier run
	// under -count. Tests hold the browser one at a time.
	require.NoError(t, chromedp.Run(ctx, network.ClearBrowserCookies()))
	return ctx
}

// serve serves a dashboard of the test Redis on a free loopback port,
// sampling every 100ms unless opts say otherwise.
func serve(t *testing.T, opts ...Option) (*Handler, string) {
	t.Helper()
	return serveRedis(t, srv.Client(), opts...)
}

// serveRedis is serve with the Redis given.
func serveRedis(t *testing.T, rdb redis.UniversalClient, opts ...Option) (*Handler, string) {
	t.Helper()
	d, err := New(rdb, opts...)
	require.NoError(t, err)
	hs := httptest.NewServer(d)
	t.Cleanup(func() {
		hs.Close()
		d.Close()
	})
	return d, hs.URL
}

// testCtx is a context that ends with the test, or after d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// jobs is a JobHandler that records what runs.
type jobs struct {
	mu      sync.Mutex
	running map[string]bool
	stopped map[string]bool
}

func newJobs() *jobs { return &jobs{running: map[string]bool{}, stopped: map[string]bool{}} }

func (h *jobs) Start(ctx context.Context, job *pool.Job) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running[job.Key] = true
	return nil
}

func (h *jobs) Stop(ctx context.Context, key string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.running, key)
	h.stopped[key] = true
	return nil
}

func (h *jobs) wasStopped(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped[key]
}

// livePool starts a node with workers on a new pool and dispatches jobs
// with payloads.
func livePool(t *testing.T, workers int, keys ...string) (string, *pool.Node, *jobs) {
	t.Helper()
	return namedPool(t, redistest.Name(t), workers, keys...)
}

// namedPool is livePool with the pool's name given.
func namedPool(t *testing.T, name string, workers int, keys ...string) (string, *pool.Node, *jobs) {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	n, err := pool.AddNode(ctx, srv.Client(), name, pool.WithWorkerTTL(2*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	h := newJobs()
	for range workers {
		_, err := n.AddWorker(ctx, h)
		require.NoError(t, err)
	}
	for _, k := range keys {
		require.NoError(t, n.DispatchJob(ctx, k, []byte("payload of "+k)))
	}
	return name, n, h
}

// liveQueue opens a queue served by one process whose handler fails
// every task whose payload says "fail" while failing is set (it starts
// set), and returns it after the tasks named in dead became dead letters.
func liveQueue(t *testing.T, dead ...string) (*queue.Queue, *queue.Server, *atomic.Bool) {
	t.Helper()
	return namedQueue(t, redistest.Name(t), dead...)
}

// namedQueue is liveQueue with the queue's name given.
func namedQueue(t *testing.T, name string, dead ...string) (*queue.Queue, *queue.Server, *atomic.Bool) {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	q, err := queue.Open(ctx, srv.Client(), name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	failing := &atomic.Bool{}
	failing.Store(true)
	s, err := q.Serve(func(ctx context.Context, task *queue.Task) ([]byte, error) {
		if string(task.Payload) == "fail" && failing.Load() {
			return nil, queue.Permanent(errors.New("cannot do <b>this</b>"))
		}
		return []byte("done"), nil
	}, queue.WithWorkers(2))
	require.NoError(t, err)
	for _, id := range dead {
		f, err := q.Submit(ctx, []byte("fail"), queue.WithTaskID(id))
		require.NoError(t, err)
		<-f.Done()
	}
	return q, s, failing
}

// get fetches a path of the dashboard with plain HTTP.
func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	resp, body := request(t, http.MethodGet, url, "", header...)
	return resp.StatusCode, body
}

// post posts a form with plain HTTP.
func post(t *testing.T, url, form string, header ...string) (int, string) {
	t.Helper()
	resp, body := request(t, http.MethodPost, url, form, header...)
	return resp.StatusCode, body
}

// request sends a request with plain HTTP and follows no redirect. A POST
// sends form as its urlencoded body. header holds name, value pairs; a
// "Host" sets the request's Host. It returns the response, whose body is
// read and closed, and the body.
func request(t *testing.T, method, url, form string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(form))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		}
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}
