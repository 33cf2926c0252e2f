package dashboard

import (
	"context"
	"fmt"
	"net/http"

	"github.com/shepherd-go/shepherd/queue"
)

// The actions that control when a queue's tasks start: pause and resume,
// and rate limits, of the whole queue and of one tenant. Like every
// action they are POSTs that ask first (queueAction), refused in
// read-only mode and without the CSRF token (guard).

func (s *Handler) pauseQueue(w http.ResponseWriter, r *http.Request) {
	s.queueAction(w, r, "pause", "Pause queue "+quote(r.PathValue("queue"))+"? Tasks in flight finish; no task starts on any process until it is resumed.", "paused",
		func(ctx context.Context, c *queue.Client) error { return c.Pause(ctx) })
}

func (s *Handler) resumeQueue(w http.ResponseWriter, r *http.Request) {
	s.queueAction(w, r, "resume", "Resume queue "+quote(r.PathValue("queue"))+"? Its waiting tasks start at once.", "resumed",
		func(ctx context.Context, c *queue.Client) error { return c.Resume(ctx) })
}

func (s *Handler) setQueueRate(w http.ResponseWriter, r *http.Request) {
	rate, ok := s.formRate(w, r)
	if !ok {
		return
	}
	s.queueAction(w, r, "set rate", rateQuestion("queue "+quote(r.PathValue("queue")), rate), "rate",
		func(ctx context.Context, c *queue.Client) error { return c.SetRate(ctx, rate) })
}

func (s *Handler) pauseTenant(w http.ResponseWriter, r *http.Request) {
	id, ok := s.formTenant(w, r)
	if !ok {
		return
	}
	s.queueAction(w, r, "pause tenant", "Pause tenant "+quote(id)+"? Its tasks in flight finish; none of its tasks starts until it is resumed.", "tenant-paused",
		func(ctx context.Context, c *queue.Client) error { return c.PauseTenant(ctx, id) })
}

func (s *Handler) resumeTenant(w http.ResponseWriter, r *http.Request) {
	id, ok := s.formTenant(w, r)
	if !ok {
		return
	}
	s.queueAction(w, r, "resume tenant", "Resume tenant "+quote(id)+"? Its waiting tasks start as its capacity and rate allow.", "tenant-resumed",
		func(ctx context.Context, c *queue.Client) error { return c.ResumeTenant(ctx, id) })
}

func (s *Handler) setTenantRate(w http.ResponseWriter, r *http.Request) {
	id, ok := s.formTenant(w, r)
	if !ok {
		return
	}
	rate, ok := s.formRate(w, r)
	if !ok {
		return
	}
	s.queueAction(w, r, "set tenant rate", rateQuestion("tenant "+quote(id), rate), "tenant-rate",
		func(ctx context.Context, c *queue.Client) error { return c.SetTenantRate(ctx, id, rate) })
}

// formTenant returns the form's tenant field, or answers 400.
func (s *Handler) formTenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PostFormValue("tenant")
	if id == "" {
		s.fail(w, r, http.StatusBadRequest, "no tenant given")
		return "", false
	}
	return id, true
}

// formRate returns the form's rate field read by queue.ParseRate, or
// answers 400 (ParseRate refuses "0" and "": "none" removes a limit).
func (s *Handler) formRate(w http.ResponseWriter, r *http.Request) (queue.Rate, bool) {
	v := r.PostFormValue("rate")
	rate, err := queue.ParseRate(v)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error()+" (want N/DURATION like 500/1s, optionally +BURST like 500/1s+25, or none)")
		return queue.Rate{}, false
	}
	return rate, true
}

// rateQuestion is the confirmation of setting what's rate to rate.
func rateQuestion(what string, rate queue.Rate) string {
	if rate.IsZero() {
		return "Remove the rate limit of " + what + "? Its tasks start as fast as workers and capacities allow."
	}
	return "Limit the starts of " + what + " to " + rateText(rate) + ", across every process? It takes effect at once."
}

// rateText renders a rate for a page: "500/1s, burst 10", or "none".
func rateText(r queue.Rate) string {
	if r.IsZero() {
		return "none"
	}
	return fmt.Sprintf("%d/%v, burst %d", r.N, r.Per, r.EffectiveBurst())
}
