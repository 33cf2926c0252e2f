package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// deadShown is how many dead letters the queue page lists.
const deadShown = 50

// queueView is a queue's page.
type queueView struct {
	Name      string               `json:"name"`
	Stats     queue.Stats          `json:"stats"`
	Dead      []queue.TaskInfo     `json:"dead"` // the newest deadShown dead letters
	Summary   QueueRow             `json:"summary"`
	Schedules []queue.ScheduleInfo `json:"schedules"` // by name (schedules.go)
	// Range names the charts' range (?range=hour or day), Step is its
	// bucket, and History its buckets, oldest first, read from Redis.
	Range   string               `json:"range"`
	Step    time.Duration        `json:"step"`
	History []queue.HistoryPoint `json:"history"`
	Charts  queueCharts          `json:"-"`
	Most    int64                `json:"-"` // the widest process bar: the most workers
	// Serving are the processes that serve (a Server, draining or not),
	// Clients those that only submit: Stats.Processes split.
	Serving []queue.ProcessInfo `json:"-"`
	Clients []queue.ProcessInfo `json:"-"`
}

func (s *Handler) queuePage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	ctx, cancel := readCtx(r)
	defer cancel()
	rng, ok := rangeNamed(r.URL.Query().Get("range"))
	if !ok {
		s.fail(w, r, http.StatusBadRequest, "unknown range "+quote(r.URL.Query().Get("range"))+": hour or day")
		return
	}
	c, ok := s.queueClient(ctx, w, r, name)
	if !ok {
		return
	}
	st, err := c.Stats(ctx)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	dead, err := c.DeadLetters(ctx, 0, deadShown)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	schedules, err := c.Schedules(ctx)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	hist, err := c.History(ctx, rng.Step, rng.N) // one pipelined read of every bucket
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	v := queueView{Schedules: schedules, Name: name, Stats: st, Dead: dead, Summary: summarizeQueue(name, st),
		Range: rng.Name, Step: rng.Step, History: hist, Charts: newQueueCharts(rng, hist, plotWidth(r.URL.Query().Get("cw")))}
	for _, p := range st.Processes {
		v.Most = max(v.Most, int64(p.Workers))
		if p.SubmitOnly() {
			v.Clients = append(v.Clients, p)
		} else {
			v.Serving = append(v.Serving, p)
		}
	}
	s.render(w, r, "queue", page{Title: "queue " + name, Live: true, View: v, Crumbs: []crumb{{"queue " + name, ""}}})
}

// queueClient returns a client of an existing queue, or answers 400 for a
// name no queue can have and 404 for a queue Redis does not hold.
func (s *Handler) queueClient(ctx context.Context, w http.ResponseWriter, r *http.Request, name string) (*queue.Client, bool) {
	c, err := s.existingQueue(ctx, name)
	var nf errNotFound
	switch {
	case errors.Is(err, queue.ErrInvalidOption):
		s.fail(w, r, http.StatusBadRequest, err.Error())
	case errors.As(err, &nf):
		s.fail(w, r, http.StatusNotFound, err.Error())
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err.Error())
	}
	return c, err == nil
}

// existingQueue returns a client of the queue name, or an error: invalid
// (a name no queue can have), errNotFound, or Redis's.
func (s *Handler) existingQueue(ctx context.Context, name string) (*queue.Client, error) {
	c, err := queue.NewClient(s.rdb, name)
	if err != nil {
		return nil, err
	}
	ok, err := c.Exists(ctx)
	if err == nil && !ok {
		err = errNotFound{"queue " + quote(name) + " not found"}
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// taskView is a task's page.
type taskView struct {
	Queue   string         `json:"queue"`
	Task    queue.TaskInfo `json:"task"`
	Preview payloadPreview `json:"-"`
	Result  payloadPreview `json:"-"`
	// PayloadGone: the task finished (done or cancelled) and its payload
	// was deleted then, as the queue does; a dead letter keeps its own.
	PayloadGone bool `json:"-"`
}

func (s *Handler) taskPage(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("queue"), r.PathValue("id")
	ctx, cancel := readCtx(r)
	defer cancel()
	c, ok := s.queueClient(ctx, w, r, name)
	if !ok {
		return
	}
	t, err := c.Inspect(ctx, id)
	switch {
	case errors.Is(err, queue.ErrTaskNotFound):
		s.fail(w, r, http.StatusNotFound, "task "+quote(id)+" not found in queue "+quote(name))
		return
	case errors.Is(err, queue.ErrInvalidOption):
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	v := taskView{Queue: name, Task: t, Preview: preview(t.Payload), Result: preview(t.Result),
		PayloadGone: len(t.Payload) == 0 && (t.State == queue.StateDone || t.State == queue.StateCancelled)}
	s.render(w, r, "task", page{Title: "task " + id, Live: true, View: v,
		Crumbs: []crumb{{"queue " + name, s.links.queue(name)}, {"task " + id, ""}}})
}

// queueAction runs an action on an existing queue and redirects to the
// page it came from (returnTo) with the done message.
func (s *Handler) queueAction(w http.ResponseWriter, r *http.Request, what, question, done string, f func(ctx context.Context, c *queue.Client) error) {
	s.queueActionN(w, r, what, question, func(ctx context.Context, c *queue.Client) (outcome, error) {
		return outcome{Done: done}, f(ctx, c)
	})
}

// queueActionN is queueAction for an action that says what it did: its
// outcome's message and counts, and where to go.
func (s *Handler) queueActionN(w http.ResponseWriter, r *http.Request, what, question string, f func(ctx context.Context, c *queue.Client) (outcome, error)) {
	name := r.PathValue("queue")
	if !s.confirmed(w, r, question) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.actionTimeout)
	defer cancel()
	c, err := s.existingQueue(ctx, name)
	var o outcome
	if err == nil {
		o, err = f(ctx, c)
	}
	if s.actionFailed(w, r, what, err) {
		return
	}
	form := url.Values{}
	for k, v := range r.PostForm {
		if k != "csrf" { // a secret of the handler's: not for logs
			form[k] = v
		}
	}
	s.logger.Info("dashboard: "+what, "queue", name, "form", form.Encode(), "done", o.N)
	to := o.To
	if to == "" {
		to = s.returnTo(r, name)
	}
	http.Redirect(w, r, withQuery(to, o.query()), http.StatusSeeOther)
}

func (s *Handler) setTenant(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("tenant")
	capacity, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("capacity")))
	if id == "" || err != nil {
		s.fail(w, r, http.StatusBadRequest, "a tenant and a whole-number capacity are needed")
		return
	}
	s.queueAction(w, r, "set tenant", "Set tenant "+quote(id)+"'s capacity to "+strconv.Itoa(capacity)+"? It takes effect at once in every process.", "tenant",
		func(ctx context.Context, c *queue.Client) error { return c.SetTenant(ctx, id, capacity) })
}

func (s *Handler) drainQueue(w http.ResponseWriter, r *http.Request) {
	s.queueAction(w, r, "drain", "Switch every serving process of queue "+quote(r.PathValue("queue"))+" to drain? Each runs what it can take now, then stops serving.", "drain",
		func(ctx context.Context, c *queue.Client) error {
			_, err := c.Drain(ctx)
			return err
		})
}
