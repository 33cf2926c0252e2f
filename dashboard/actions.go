package dashboard

import (
	"errors"
	"net/http"
	"sort"
	"strconv"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// confirmView is the page that asks before an action.
type confirmView struct {
	Question string
	Action   string
	Fields   []field // the form's fields, posted again with confirm=yes
	Back     string
}

type field struct{ Name, Value string }

// confirmed reports whether the action's form says confirm=yes; if not,
// it answers with a page that asks, whose form posts the same fields
// again with it. Every action asks first: a button is one click away
// from a mistake.
func (s *Handler) confirmed(w http.ResponseWriter, r *http.Request, question string) bool {
	if r.PostFormValue("confirm") == "yes" {
		return true
	}
	v := confirmView{Question: question, Action: r.URL.EscapedPath(), Back: s.backURL(r)}
	for name, vals := range r.PostForm {
		if name == "csrf" || name == "confirm" {
			continue
		}
		for _, val := range vals {
			v.Fields = append(v.Fields, field{name, val})
		}
	}
	sort.Slice(v.Fields, func(i, j int) bool { return v.Fields[i].Name < v.Fields[j].Name })
	s.render(w, r, "confirm", page{Title: "confirm", View: v})
	return false
}

// backURL is where a confirmation's Cancel goes: the page of the pool,
// or the queue's page the action came from (returnTo).
func (s *Handler) backURL(r *http.Request) string {
	if p := r.PathValue("pool"); p != "" {
		return s.links.pool(p)
	}
	if q := r.PathValue("queue"); q != "" {
		return s.returnTo(r, q)
	}
	return s.links.root()
}

// errNotFound is an action's target that does not exist.
type errNotFound struct{ msg string }

func (e errNotFound) Error() string { return e.msg }

// actionFailed answers an action's error, if any, with a fitting status,
// and reports whether it did.
func (s *Handler) actionFailed(w http.ResponseWriter, r *http.Request, what string, err error) bool {
	if err == nil {
		return false
	}
	code := http.StatusBadGateway
	var nf errNotFound
	switch {
	case errors.As(err, &nf), errors.Is(err, pool.ErrJobNotFound), errors.Is(err, pool.ErrNoSchedule), errors.Is(err, queue.ErrTaskNotFound):
		code = http.StatusNotFound
	case errors.Is(err, pool.ErrInvalidKey), errors.Is(err, pool.ErrInvalidOption), errors.Is(err, queue.ErrInvalidOption),
		errors.Is(err, queue.ErrUnknownTenant):
		code = http.StatusBadRequest
	case errors.Is(err, queue.ErrQueueFull), errors.Is(err, pool.ErrPoolShutdown):
		code = http.StatusConflict
	}
	s.logger.Warn("dashboard: action failed", "action", what, "path", r.URL.Path, "error", err)
	s.fail(w, r, code, what+": "+err.Error())
	return true
}

// quote quotes a name for a message; the templates escape it.
func quote(s string) string { return strconv.Quote(s) }
