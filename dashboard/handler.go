package dashboard

import (
	"context"
	"crypto/rand"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Handler is a dashboard of the pools and queues of one Redis, served as
// an http.Handler. It is safe for concurrent use. It runs no goroutine
// of its own: the charts read the history the pools and queues keep in
// Redis.
type Handler struct {
	cfg    config
	rdb    redis.UniversalClient
	links  links
	pages  map[string]*template.Template // the page templates with this handler's links
	mux    *http.ServeMux
	secret []byte // keys the CSRF token: WithCSRFKey's, else new for each handler
	logger *slog.Logger
}

// New returns a dashboard of rdb's pools and queues, configured by opts.
// The charts read the history the pools and queues keep in Redis
// (pool.History, queue.Client.History). A nil client or an invalid option returns
// an error wrapping ErrInvalidOption. New does not talk to Redis; each
// request does, and answers 502 when Redis fails.
func New(rdb redis.UniversalClient, opts ...Option) (*Handler, error) {
	if redisutil.IsNil(rdb) {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	secret := cfg.csrfKey
	if secret == nil {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
	}
	l := links{prefix: cfg.prefix}
	s := &Handler{cfg: cfg, rdb: rdb, links: l, pages: l.templates(), secret: secret, logger: cfg.logger}
	s.routes()
	return s, nil
}

// Close releases what the handler holds, which is nothing since its
// charts read their history from Redis (it sampled the pools itself
// before); defer it all the same. It does not close the Redis client.
// The handler still serves afterwards. Close may be called more than
// once.
func (s *Handler) Close() {}

// ServeHTTP serves a request through the guards (Host, token, prefix,
// method, read-only, cross-site checks), then the page or the action.
func (s *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.guard(s.mux).ServeHTTP(w, r)
}

func (s *Handler) routes() {
	m := http.NewServeMux()
	p := s.cfg.prefix
	if p != "" {
		m.HandleFunc("GET "+p+"/{$}", s.overview)
		m.Handle("GET "+p, http.RedirectHandler(p+"/", http.StatusMovedPermanently))
	} else {
		m.HandleFunc("GET /{$}", s.overview)
	}
	m.HandleFunc("GET "+p+"/pool/{pool}", s.poolPage)
	m.HandleFunc("GET "+p+"/pool/{pool}/find", s.findJob)
	m.HandleFunc("GET "+p+"/pool/{pool}/jobs", s.jobList)
	m.HandleFunc("GET "+p+"/pool/{pool}/job/{key...}", s.jobPage)
	m.HandleFunc("POST "+p+"/pool/{pool}/stop", s.stopJob)
	m.HandleFunc("POST "+p+"/pool/{pool}/shutdown", s.shutdownPool)
	m.HandleFunc("POST "+p+"/pool/{pool}/unschedule", s.unschedule)
	m.HandleFunc("POST "+p+"/pool/{pool}/stop-ticker", s.stopTicker)
	m.HandleFunc("GET "+p+"/queue/{queue}", s.queuePage)
	m.HandleFunc("GET "+p+"/queue/{queue}/tasks", s.taskList)
	m.HandleFunc("GET "+p+"/queue/{queue}/task/{id...}", s.taskPage)
	m.HandleFunc("POST "+p+"/queue/{queue}/replay", s.replayDead)
	m.HandleFunc("POST "+p+"/queue/{queue}/delete", s.deleteDead)
	m.HandleFunc("POST "+p+"/queue/{queue}/tenant", s.setTenant)
	m.HandleFunc("POST "+p+"/queue/{queue}/drain", s.drainQueue)
	m.HandleFunc("POST "+p+"/queue/{queue}/schedule/run", s.runSchedule)
	m.HandleFunc("POST "+p+"/queue/{queue}/pause", s.pauseQueue)
	m.HandleFunc("POST "+p+"/queue/{queue}/resume", s.resumeQueue)
	m.HandleFunc("POST "+p+"/queue/{queue}/rate", s.setQueueRate)
	m.HandleFunc("POST "+p+"/queue/{queue}/tenant/pause", s.pauseTenant)
	m.HandleFunc("POST "+p+"/queue/{queue}/tenant/resume", s.resumeTenant)
	m.HandleFunc("POST "+p+"/queue/{queue}/tenant/rate", s.setTenantRate)
	m.HandleFunc("POST "+p+"/queue/{queue}/tenant/remove", s.removeTenant)
	// A tenant named like an action above has its page still: the
	// actions are POSTs, the page a GET.
	m.HandleFunc("GET "+p+"/queue/{queue}/tenant/{id}", s.tenantPage)
	m.HandleFunc("POST "+p+"/queue/{queue}/cancel", s.cancelTasks)
	m.HandleFunc("POST "+p+"/queue/{queue}/replay-all", s.replayAll)
	m.HandleFunc("POST "+p+"/queue/{queue}/purge", s.purgeDead)
	m.Handle("GET "+p+"/static/{file}", http.StripPrefix(p, http.FileServerFS(staticFS)))
	s.mux = m
}

// readCtx bounds a page's reads.
func readCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 5*time.Second)
}
