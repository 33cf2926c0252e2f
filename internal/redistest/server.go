package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// backend is what actually runs Redis: a child process or a container.
type backend interface {
	// start starts (or starts again) the server with the same data and
	// returns the address it listens on.
	start(ctx context.Context) (string, error)
	kill() error
	stop() error
	freeze() error
	thaw() error
	// destroy stops the server for good and removes its data.
	destroy() error
}

// Server is a private Redis server owned by a test. Its methods are safe
// for concurrent use.
type Server struct {
	cfg config
	be  backend

	addr atomic.Value // string; read without mu so dials never wait on a restart

	tls *tls.Config // what clients trust, with WithTLS; nil otherwise

	mu      sync.Mutex
	running bool
	closed  bool
	client  *redis.Client
	clients []*redis.Client
}

// readyTimeout bounds how long a start waits for the server to answer PING.
const readyTimeout = 15 * time.Second

// Start starts a private Redis server for tb and stops it, removing its
// data, when tb's test ends. It fails tb (never skips) when no server can
// be started, with a message that says what to install.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := New(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("redistest: close: %v", err)
		}
	})
	return s
}

// New starts a private Redis server. The caller must Close it. Most tests
// want Start; New is for TestMain, where there is no testing.TB.
func New(opts ...Option) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	var be backend
	var procErr error
	if path, err := exec.LookPath(cfg.binary); err == nil {
		be, procErr = newProcess(path, cfg)
	} else {
		procErr = fmt.Errorf("no %q binary on PATH", cfg.binary)
	}
	if be == nil {
		if !cfg.container {
			return nil, notAvailable(procErr, errors.New("container fallback disabled"))
		}
		be = newContainer(cfg)
	}
	s := &Server{cfg: cfg, be: be}
	ctx, cancel := context.WithTimeout(context.Background(), 2*readyTimeout)
	defer cancel()
	addr, err := be.start(ctx)
	if err != nil {
		_ = be.destroy()
		if _, isContainer := be.(*container); isContainer {
			return nil, notAvailable(procErr, err)
		}
		return nil, err
	}
	s.addr.Store(addr)
	s.running = true
	if p, ok := be.(*process); ok && p.tls != nil {
		s.tls = p.tls.client
	}
	s.client = s.newClient()
	return s, nil
}

func notAvailable(procErr, containerErr error) error {
	return fmt.Errorf("redistest: cannot start Redis: %v; Docker fallback failed: %v. "+
		"Install redis-server (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) "+
		"or start a Docker engine", procErr, containerErr)
}

// Addr returns the server's host:port.
func (s *Server) Addr() string {
	addr, _ := s.addr.Load().(string)
	return addr
}

// TLSConfig returns a client TLS configuration that trusts the server's
// certificate (a copy, safe to change), or nil for a server without
// WithTLS.
func (s *Server) TLSConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.Clone()
}

// Password returns the password the server requires, or "".
func (s *Server) Password() string { return s.cfg.password }

// Client returns the server's shared client. It dials the server's current
// address, so it keeps working across Restart. Do not close it: Close does.
func (s *Server) Client() redis.UniversalClient { return s.client }

// NewClient returns a new client with a connection pool of its own, for
// tests that need separate connections (pub/sub, one client per simulated
// process). Close closes it too; closing it earlier is fine.
func (s *Server) NewClient() *redis.Client {
	c := s.newClient()
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	return c
}

// NewCtxOnlyClient is NewClient as docs/pool.md advises users to build
// theirs (ContextTimeoutEnabled), with no read timeout of its own: a call
// lasts until its ctx ends, so a test of a frozen server measures the
// library's own bounds.
func (s *Server) NewCtxOnlyClient() *redis.Client {
	o := s.options()
	o.ContextTimeoutEnabled, o.ReadTimeout = true, -1
	c := redis.NewClient(o)
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	return c
}

func (s *Server) newClient() *redis.Client { return redis.NewClient(s.options()) }

// options are the options of the server's clients.
func (s *Server) options() *redis.Options {
	return &redis.Options{
		Addr:     s.Addr(),
		Password: s.cfg.password,
		// go-redis v9.22 writes the shared options' maintenance-notification
		// mode, unsynchronised, when the handshake fails (as on Redis 7.0);
		// a client's dedicated connections (Conn) then race with its pool
		// under -race. Redis 7 has no such notifications anyway.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		// Dial the current address: a container may come back on another
		// port after Restart.
		// go-redis applies TLSConfig only with its own dialer.
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			if s.tls != nil {
				d := tls.Dialer{Config: s.TLSConfig()}
				return d.DialContext(ctx, network, s.Addr())
			}
			var d net.Dialer
			return d.DialContext(ctx, network, s.Addr())
		},
	}
}

// Kill kills the server with SIGKILL and waits until it is gone: whatever
// was not yet written to the append-only file is lost. Restart brings it
// back.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	s.running = false
	return s.be.kill()
}

// Stop shuts the server down gracefully (SIGTERM: Redis flushes its
// append-only file) and waits until it is gone. Restart brings it back.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	s.running = false
	return s.be.stop()
}

// Restart starts the server again on the same port with the same data
// directory, stopping it gracefully first if it runs, and waits until it
// answers PING. With WithAOF, the data survives; without persistence the
// server comes back empty.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("redistest: restart of a closed server")
	}
	if s.running {
		if err := s.be.stop(); err != nil {
			return err
		}
		s.running = false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*readyTimeout)
	defer cancel()
	addr, err := s.be.start(ctx)
	if err != nil {
		return err
	}
	s.addr.Store(addr)
	s.running = true
	return nil
}

// RestartWith restarts the server as Restart does, with args appended to
// its redis-server arguments for this start and the later ones. A server
// in a container refuses.
func (s *Server) RestartWith(args ...string) error {
	p, ok := s.be.(*process)
	if !ok {
		return errors.New("redistest: RestartWith needs a redis-server process, not a container")
	}
	s.mu.Lock()
	p.cfg.args = append(slices.Clip(p.cfg.args), args...)
	s.mu.Unlock()
	return s.Restart()
}

// Pause freezes the server for d and then lets it run again; it returns
// after d. Clients see a server that accepts connections but does not
// answer, like one stuck in a long command or a GC-less stall. Run it in a
// goroutine to act while Redis is frozen.
func (s *Server) Pause(d time.Duration) error {
	err := s.Freeze()
	if errors.Is(err, errNoFreeze) {
		return s.debugSleep(d)
	}
	if err != nil {
		return err
	}
	time.Sleep(d)
	return s.Thaw()
}

// debugSleep blocks the server with DEBUG SLEEP, for backends that cannot
// be sent SIGSTOP.
func (s *Server) debugSleep(d time.Duration) error {
	c := s.newClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d+readyTimeout)
	defer cancel()
	if err := c.Do(ctx, "DEBUG", "SLEEP", fmt.Sprintf("%.3f", d.Seconds())).Err(); err != nil {
		return fmt.Errorf("redistest: DEBUG SLEEP: %w", err)
	}
	return nil
}

// Freeze stops the server from answering (SIGSTOP) until Thaw.
func (s *Server) Freeze() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return errors.New("redistest: freeze of a server that is not running")
	}
	return s.be.freeze()
}

// Thaw lets a frozen server run again (SIGCONT).
func (s *Server) Thaw() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return errors.New("redistest: thaw of a server that is not running")
	}
	return s.be.thaw()
}

// Close closes the server's clients, kills the server and removes its data
// directory. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed, s.running = true, false
	clients := append([]*redis.Client{s.client}, s.clients...)
	s.mu.Unlock()

	var errs []error
	for _, c := range clients {
		if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.be.destroy())
	return errors.Join(errs...)
}

// waitReady polls addr with PING until it answers, ctx ends or exited is
// closed (the server died). With pid > 0 the server that answers must be
// that process (INFO's process_id): on a busy machine another test's
// server may have taken the port, when a restart keeps a killed server's
// port or between freePort's probe and the bind, and the process we
// started then exits while the other one answers.
func waitReady(ctx context.Context, addr, password string, tlsConfig *tls.Config, exited <-chan struct{}, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	// Probe the port with plain dials first: a go-redis client would log
	// every refused dial while the server is still starting.
	var last error
	var c *redis.Client
	defer func() {
		if c != nil {
			_ = c.Close()
		}
	}()
	for {
		if c == nil {
			var conn net.Conn
			conn, last = net.DialTimeout("tcp", addr, time.Second)
			if last == nil {
				_ = conn.Close()
				c = redis.NewClient(&redis.Options{Addr: addr, Password: password, TLSConfig: tlsConfig, MaxRetries: -1, DialTimeout: time.Second})
			}
		}
		if c != nil {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			last = c.Ping(pctx).Err() // LOADING while the AOF is read
			if last == nil && pid > 0 {
				last = answersAs(pctx, c, addr, pid)
			}
			pcancel()
			if last == nil {
				return nil
			}
			if errors.Is(last, errNotOurs) {
				return last
			}
		}
		select {
		case <-exited:
			return errors.New("redis-server exited during start")
		case <-ctx.Done():
			return fmt.Errorf("redis at %s did not answer PING within %v: %w", addr, readyTimeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// errNotOurs: the server that answers at an address is another process
// than the one started for it.
var errNotOurs = errors.New("not this server")

// answersAs checks that the server c reaches is process pid.
func answersAs(ctx context.Context, c *redis.Client, addr string, pid int) error {
	info, err := infoFields(ctx, c, addr, "server")
	if err != nil {
		return err
	}
	switch v, ok := info["process_id"]; {
	case !ok:
		return fmt.Errorf("redistest: INFO server of %s has no process_id", addr)
	case v != strconv.Itoa(pid):
		return fmt.Errorf("redistest: %w: process %s answers at %s, not the redis-server started for it (pid %d): another one took the port", errNotOurs, v, addr, pid)
	}
	return nil
}
