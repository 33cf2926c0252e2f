package rmap

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/require"
)

// proxy forwards TCP connections to Redis and can turn the open ones into
// black holes: they stay open but drop everything, like a half-open
// connection after a network partition.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[*proxyConn]struct{}
}

type proxyConn struct {
	client, server net.Conn
	mu             sync.Mutex
	dead           bool
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, conns: make(map[*proxyConn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		pc := &proxyConn{client: c, server: s}
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pc, c, s)
		go p.pipe(pc, s, c)
	}
}

// pipe copies from src to dst until either closes, dropping what it reads
// once pc is dead.
func (p *proxy) pipe(pc *proxyConn, src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			pc.mu.Lock()
			dead := pc.dead
			pc.mu.Unlock()
			if !dead {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			_ = src.Close()
			_ = dst.Close()
			return
		}
	}
}

// blackhole silences every connection open now; new ones work.
func (p *proxy) blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		pc.mu.Lock()
		pc.dead = true
		pc.mu.Unlock()
		delete(p.conns, pc)
	}
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for pc := range p.conns {
		_ = pc.client.Close()
		_ = pc.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestHalfOpenPubSubIsReplaced silences the replica's connections without
// closing them. go-redis sees no error; the unanswered revision check does,
// and the replica resubscribes on a new connection and reloads.
func TestHalfOpenPubSubIsReplaced(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	p := startProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.ln.Addr().String(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	name := redistest.Name(t)
	r := join(t, rdb, name, WithCheckInterval(50*time.Millisecond))
	t.Cleanup(func() { _ = rdb.Close() }) // after r.Close: cleanups run last-in first-out
	w := join(t, srv.NewClient(), name)

	_, err := w.Set(ctx, "k", "1")
	require.NoError(t, err)
	require.NoError(t, r.Sync(ctx))

	p.blackhole()
	_, err = w.Set(ctx, "k", "2")
	require.NoError(t, err)
	require.Eventually(t, func() bool { v, _ := r.Get("k"); return v == "2" }, 10*time.Second, time.Millisecond)

	// The pub/sub connection works again: checks are answered, and
	// changes arrive by message.
	before := r.pongs.Load()
	require.Eventually(t, func() bool { return r.pongs.Load() >= before+3 }, 10*time.Second, time.Millisecond)
	_, err = w.Set(ctx, "k", "3")
	require.NoError(t, err)
	require.Eventually(t, func() bool { v, _ := r.Get("k"); return v == "3" }, 10*time.Second, time.Millisecond)
}
