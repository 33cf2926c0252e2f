// Package dashboard serves shepherd's dashboard: an overview of the pools and
// queues a Redis holds, a page per pool, per job, per queue and per task,
// each with a JSON twin (?format=json), and the operators' actions (stop a
// job, shut a pool down, replay or delete a dead letter, set a tenant's
// capacity, drain a queue) as confirmed POSTs.
//
// It is built on net/http, html/template and embed alone: no build step,
// nothing loaded from elsewhere, so it works offline. Pages refresh their
// live part every second by fetching it again (?partial=1).
package dashboard

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Config configures a dashboard.
type Config struct {
	// Redis is the server whose pools and queues are shown (required).
	Redis redis.UniversalClient
	// Token, when set, is required by every request: as the cookie set by
	// opening any page with ?token=TOKEN once, or as an Authorization:
	// Bearer header.
	Token string
	// ReadOnly hides every action and refuses every POST.
	ReadOnly bool
	// AnyHost accepts requests for any Host header. Without it only
	// loopback names are accepted (localhost, 127.0.0.1, [::1]), which
	// keeps a web page elsewhere from reaching a loopback dashboard by
	// DNS rebinding; set it when the dashboard listens on another address.
	AnyHost bool
	// SampleEvery is how often the charts' history is sampled while
	// someone looks (default 2s); History how much of it is kept
	// (default 5 minutes).
	SampleEvery time.Duration
	History     time.Duration
	// RefreshEvery is how often an open page fetches its live part again
	// (default 1s).
	RefreshEvery time.Duration
	// ActionTimeout bounds an action such as stopping a job (default 15s);
	// reads get 5s.
	ActionTimeout time.Duration
	// Logger gets the actions taken and the errors met (default: none).
	Logger *slog.Logger
}

// Server is a dashboard. It is an http.Handler; Close stops its sampler.
type Server struct {
	cfg       Config
	rdb       redis.UniversalClient
	mux       *http.ServeMux
	secret    []byte // keys the CSRF token; new each run
	logger    *slog.Logger
	hist      *history
	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a dashboard of cfg.Redis. Call Close when done.
func New(cfg Config) (*Server, error) {
	if redisutil.IsNil(cfg.Redis) {
		return nil, errors.New("web: nil Redis client")
	}
	if cfg.SampleEvery < 0 || cfg.History < 0 || cfg.ActionTimeout < 0 || cfg.RefreshEvery < 0 {
		return nil, errors.New("web: SampleEvery, History, RefreshEvery and ActionTimeout must not be negative")
	}
	if cfg.RefreshEvery == 0 {
		cfg.RefreshEvery = time.Second
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = 2 * time.Second
	}
	if cfg.History == 0 {
		cfg.History = 5 * time.Minute
	}
	if cfg.ActionTimeout == 0 {
		cfg.ActionTimeout = 15 * time.Second
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, rdb: cfg.Redis, secret: secret, logger: logger,
		hist: newHistory(int(cfg.History / cfg.SampleEvery)), stop: cancel, done: make(chan struct{})}
	s.routes()
	go s.sampleLoop(ctx)
	return s, nil
}

// Close stops the history sampler. It does not close the Redis client.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.stop()
		<-s.done
	})
}

// ServeHTTP serves a request through the guards: host, token, method,
// CSRF, read-only; then the page or the action.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.guard(s.mux).ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.overview)
	m.HandleFunc("GET /pool/{pool}", s.poolPage)
	m.HandleFunc("GET /pool/{pool}/find", s.findJob)
	m.HandleFunc("GET /pool/{pool}/job/{key...}", s.jobPage)
	m.HandleFunc("POST /pool/{pool}/stop", s.stopJob)
	m.HandleFunc("POST /pool/{pool}/shutdown", s.shutdownPool)
	m.HandleFunc("GET /queue/{queue}", s.queuePage)
	m.HandleFunc("GET /queue/{queue}/task/{id...}", s.taskPage)
	m.HandleFunc("POST /queue/{queue}/replay", s.replayDead)
	m.HandleFunc("POST /queue/{queue}/delete", s.deleteDead)
	m.HandleFunc("POST /queue/{queue}/tenant", s.setTenant)
	m.HandleFunc("POST /queue/{queue}/drain", s.drainQueue)
	m.Handle("GET /static/{file}", http.FileServerFS(staticFS))
	s.mux = m
}

// readCtx bounds a page's reads.
func readCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 5*time.Second)
}
