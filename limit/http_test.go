package limit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gate is a handler that holds requests until released.
type gate struct {
	entered chan struct{}
	release chan struct{}
	status  int
}

func newGate(status int) *gate {
	return &gate{entered: make(chan struct{}, 16), release: make(chan struct{}), status: status}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.entered <- struct{}{}
	<-g.release
	w.WriteHeader(g.status)
}

func TestMiddlewareRejectsWith429AndRetryAfter(t *testing.T) {
	t.Parallel()
	lim := newSimple(t, 1)
	mw, err := Middleware(lim, WithRetryAfter(1500*time.Millisecond))
	require.NoError(t, err)
	g := newGate(http.StatusOK)
	srv := httptest.NewServer(mw(g))
	defer srv.Close()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, err := srv.Client().Get(srv.URL)
		if !assert.NoError(t, err) {
			return
		}
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}()
	<-g.entered

	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
	assert.Equal(t, "2", resp.Header.Get("Retry-After"), "1.5s rounds up to 2s")

	close(g.release)
	wg.Wait()
	require.Eventually(t, func() bool { return lim.InFlight() == 0 }, 5*time.Second, time.Millisecond)
}

func TestMiddlewareOutcomes(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	lim, err := NewSimple(rec)
	require.NoError(t, err)
	mw, err := Middleware(lim)
	require.NoError(t, err)
	for _, status := range []int{http.StatusOK, http.StatusServiceUnavailable, http.StatusNotFound} {
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
		}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Equal(t, status, w.Code)
	}
	require.Len(t, rec.samples, 3)
	assert.Equal(t, []bool{false, true, false},
		[]bool{rec.samples[0].Dropped, rec.samples[1].Dropped, rec.samples[2].Dropped})

	// A panicking handler releases its slot and the panic goes on.
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	assert.PanicsWithValue(t, "boom", func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	})
	assert.Zero(t, lim.InFlight())
	assert.Len(t, rec.samples, 3, "a panic is not a sample")
}

func TestMiddlewarePartitionsByHeader(t *testing.T) {
	t.Parallel()
	f, _ := NewFixed(10)
	p, err := NewPartitioned(f, WithPartition("live", 0.9), WithPartition("batch", 0.1))
	require.NoError(t, err)
	mw, err := Middleware(p, WithRequestPartition(func(r *http.Request) string {
		return r.Header.Get("X-Priority")
	}))
	require.NoError(t, err)
	g := newGate(http.StatusOK)
	h := mw(g)

	// Ten batch requests borrow the whole limit...
	var wg sync.WaitGroup
	serve := func(prio string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Priority", prio)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); serve("batch") }()
		<-g.entered
	}
	assert.Equal(t, 10, p.PartitionInFlight("batch"))
	// ...an 11th is refused, and so is a live one, which reserves its share.
	assert.Equal(t, http.StatusTooManyRequests, serve("batch").Code)
	assert.Equal(t, http.StatusTooManyRequests, serve("live").Code)
	close(g.release)
	wg.Wait()
	assert.Zero(t, p.InFlight())
}

func TestMiddlewareBlockingContextEnds(t *testing.T) {
	t.Parallel()
	b := newBlocking(t, 1, WithBlockingTimeout(0))
	tok, err := b.Acquire(t.Context())
	require.NoError(t, err)
	defer tok.Success()
	mw, err := Middleware(b)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	w := httptest.NewRecorder()
	mw(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
}

func TestTransportLimitsClient(t *testing.T) {
	t.Parallel()
	g := newGate(http.StatusOK)
	srv := httptest.NewServer(g)
	defer srv.Close()
	lim := newSimple(t, 1)
	tr, err := NewTransport(lim, srv.Client().Transport)
	require.NoError(t, err)
	client := &http.Client{Transport: tr}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, err := client.Get(srv.URL)
		if assert.NoError(t, err) {
			resp.Body.Close()
		}
	}()
	<-g.entered
	_, err = client.Get(srv.URL)
	require.ErrorIs(t, err, ErrLimitExceeded)
	close(g.release)
	wg.Wait()
	assert.Zero(t, lim.InFlight())
}

func TestTransportOutcomes(t *testing.T) {
	t.Parallel()
	status := http.StatusTooManyRequests
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
	}))
	defer srv.Close()
	rec := &recorder{}
	lim, err := NewSimple(rec)
	require.NoError(t, err)
	tr, err := NewTransport(lim, srv.Client().Transport,
		WithRequestPartition(func(*http.Request) string { return "x" }))
	require.NoError(t, err)
	client := &http.Client{Transport: tr}
	for _, s := range []int{http.StatusTooManyRequests, http.StatusOK} {
		status = s
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		resp.Body.Close()
	}
	require.Len(t, rec.samples, 2)
	assert.True(t, rec.samples[0].Dropped)
	assert.False(t, rec.samples[1].Dropped)

	_, err = NewTransport(nil, nil)
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = Middleware(nil)
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = Middleware(lim, WithRetryAfter(0))
	require.ErrorIs(t, err, ErrInvalidOption)
}
