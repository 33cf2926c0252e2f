package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/shepherd-go/shepherd/queue"
)

// The actions on many tasks at once: replay, delete or cancel the tasks
// selected on a list, replay every dead letter, purge them all. Like
// every action they are POSTs that ask first, refused in read-only mode
// and without the CSRF token (guard). They act one task at a time
// through the library, and report how many they did in the flash
// message of the page they return to.

const (
	// maxSelected is the most task ids one POST may name: a list page
	// offers listPageSize.
	maxSelected = 500
	// bulkPage is how many dead letters replay-all reads at a time.
	bulkPage = 100
	// replayAllMax bounds how many dead letters one replay-all replays,
	// a round trip each, so that it ends well within the action timeout;
	// the flash message says how many are left for the next.
	replayAllMax = 5000
)

// errFinished is a task that finished before it could be cancelled.
var errFinished = errors.New("the task finished already: nothing to cancel")

// outcome is what an action did, for its flash message (?done=) and its
// redirect.
type outcome struct {
	Done    string // a key of flashes or countFlashes
	Counted bool   // a bulk action: the counts below are reported
	N       int    // tasks acted on
	Missing int    // tasks no longer in the state the action needs
	Refused int    // dead letters whose tenant was removed (replay)
	Left    int    // dead letters left for another replay-all
	To      string // where to go, instead of returnTo's page
}

// query is the redirect's query: the message's key and its counts,
// integers alone, so that a link cannot make a page say anything else.
func (o outcome) query() url.Values {
	v := url.Values{"done": {o.Done}}
	if o.Counted {
		v.Set("n", strconv.Itoa(o.N))
		for k, n := range map[string]int{"missing": o.Missing, "refused": o.Refused, "left": o.Left} {
			if n > 0 {
				v.Set(k, strconv.Itoa(n))
			}
		}
	}
	return v
}

// countFlash is the message of a bulk action, built from its counts.
type countFlash struct {
	noun    string // singular; an s is added for more
	did     string // "queued again"
	missing string // what the missing ones are
}

// countFlashes are the bulk actions' messages (?done=, with ?n=).
var countFlashes = map[string]countFlash{
	"replayed":  {"dead letter", "queued again", "no longer dead letters (replayed or deleted meanwhile)"},
	"deleted":   {"dead letter", "deleted", "no longer dead letters (replayed or deleted meanwhile)"},
	"purged":    {"dead letter", "purged", ""},
	"cancelled": {"task", "cancelled (one in flight finishes as cancelled when its attempt ends)", "not found, or finished already"},
}

// flashFor is the message an action's redirect asks for: one of a fixed
// list, with the counts of a bulk action, or "".
func flashFor(qs url.Values) string {
	done := qs.Get("done")
	cf, ok := countFlashes[done]
	if !ok || !qs.Has("n") {
		return flashes[done]
	}
	count := func(k string) int {
		n, err := strconv.Atoi(qs.Get(k))
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	n := count("n")
	noun := cf.noun
	if n != 1 {
		noun += "s"
	}
	msg := fmt.Sprintf("%d %s %s.", n, noun, cf.did)
	if m := count("missing"); m > 0 && cf.missing != "" {
		msg += fmt.Sprintf(" %d %s.", m, cf.missing)
	}
	if m := count("refused"); m > 0 {
		msg += fmt.Sprintf(" %d refused: their tenant was removed.", m)
	}
	if m := count("left"); m > 0 {
		msg += fmt.Sprintf(" %d more left: replay all again.", m)
	}
	return msg
}

// returnTo is the page an action on queue name returns to (and its
// confirmation's Cancel): the form's from=tenant goes to the tenant's
// page, from=STATE to that list (of the form's filter= tenant), else the
// queue's page. It is built from the links alone: no form can send the
// browser elsewhere.
func (s *Handler) returnTo(r *http.Request, name string) string {
	from := r.PostFormValue("from")
	if t := r.PostFormValue("tenant"); from == "tenant" && t != "" {
		return s.links.tenant(name, t)
	}
	if from != "" && stateName(queue.State(from)) != "" {
		return s.links.tasks(name, from, r.PostFormValue("filter"), 1)
	}
	return s.links.queue(name)
}

// withQuery adds v to the address u.
func withQuery(u string, v url.Values) string {
	if strings.Contains(u, "?") {
		return u + "&" + v.Encode()
	}
	return u + "?" + v.Encode()
}

// formIDs returns the form's task ids (id=, repeated), or answers 400
// for none or more than maxSelected.
func (s *Handler) formIDs(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	var ids []string
	for _, id := range r.PostForm["id"] {
		if id != "" {
			ids = append(ids, id)
		}
	}
	switch {
	case len(ids) == 0:
		s.fail(w, r, http.StatusBadRequest, "no task selected")
		return nil, false
	case len(ids) > maxSelected:
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%d tasks selected: at most %d at a time", len(ids), maxSelected))
		return nil, false
	}
	return ids, true
}

// idsText names the ids for a question: the first few, quoted.
func idsText(ids []string) string {
	const shown = 10
	var b strings.Builder
	for i, id := range ids[:min(len(ids), shown)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(id))
	}
	if len(ids) > shown {
		fmt.Fprintf(&b, " and %d more", len(ids)-shown)
	}
	return b.String()
}

// eachID runs f on each id and counts what it did. Single, f's error is
// the action's (a 404 for a task not found, as a one-task action
// answers). Else a task not found or finished (ErrTaskNotFound,
// errFinished) counts as missing and one whose tenant was removed
// (ErrUnknownTenant) as refused; another error stops it, and says how
// many were done before.
func eachID(ctx context.Context, ids []string, done string, single bool, f func(ctx context.Context, id string) error) (outcome, error) {
	o := outcome{Done: done, Counted: !single}
	for _, id := range ids {
		err := f(ctx, id)
		switch {
		case err == nil:
			o.N++
		case single:
			return o, err
		case errors.Is(err, queue.ErrTaskNotFound), errors.Is(err, errFinished):
			o.Missing++
		case errors.Is(err, queue.ErrUnknownTenant):
			o.Refused++
		default:
			return o, fmt.Errorf("%d of %d done, then %q: %w", o.N, len(ids), id, err)
		}
	}
	return o, nil
}

func (s *Handler) replayDead(w http.ResponseWriter, r *http.Request) {
	ids, ok := s.formIDs(w, r)
	if !ok {
		return
	}
	q := "Queue dead letter " + idsText(ids) + " again, with its attempts reset?"
	if len(ids) > 1 {
		q = fmt.Sprintf("Queue these %d dead letters again, with their attempts reset? %s", len(ids), idsText(ids))
	}
	s.queueActionN(w, r, "replay", q, func(ctx context.Context, c *queue.Client) (outcome, error) {
		return eachID(ctx, ids, "replayed", len(ids) == 1, c.Replay)
	})
}

func (s *Handler) deleteDead(w http.ResponseWriter, r *http.Request) {
	ids, ok := s.formIDs(w, r)
	if !ok {
		return
	}
	q := "Delete dead letter " + idsText(ids) + "? Its payload and errors are lost."
	if len(ids) > 1 {
		q = fmt.Sprintf("Delete these %d dead letters? Their payloads and errors are lost. %s", len(ids), idsText(ids))
	}
	s.queueActionN(w, r, "delete", q, func(ctx context.Context, c *queue.Client) (outcome, error) {
		return eachID(ctx, ids, "deleted", len(ids) == 1, c.DeleteDead)
	})
}

// cancelTasks cancels the selected tasks. Each is read first, so that
// one that finished meanwhile is reported as such rather than counted as
// cancelled (Cancel does nothing to it and says nothing).
func (s *Handler) cancelTasks(w http.ResponseWriter, r *http.Request) {
	ids, ok := s.formIDs(w, r)
	if !ok {
		return
	}
	q := fmt.Sprintf("Cancel %d task(s) of queue %s? One waiting finishes at once as cancelled; one in flight has its handler's context cancelled. %s",
		len(ids), quote(r.PathValue("queue")), idsText(ids))
	s.queueActionN(w, r, "cancel", q, func(ctx context.Context, c *queue.Client) (outcome, error) {
		// Counted even for one task: it may have finished meanwhile.
		return eachID(ctx, ids, "cancelled", false, func(ctx context.Context, id string) error {
			t, err := c.Inspect(ctx, id)
			switch {
			case err != nil:
				return err
			case t.State == queue.StateDone || t.State == queue.StateDead || t.State == queue.StateCancelled:
				return errFinished
			}
			return c.Cancel(ctx, id)
		})
	})
}

// replayAll replays every dead letter, bulkPage at a time, at most as
// many as there were when it began (one that dies again meanwhile waits
// for the next) and at most replayAllMax.
func (s *Handler) replayAll(w http.ResponseWriter, r *http.Request) {
	q := "Queue every dead letter of queue " + quote(r.PathValue("queue")) + " again, with their attempts reset? At most " +
		strconv.Itoa(replayAllMax) + " at a time."
	s.queueActionN(w, r, "replay all", q, func(ctx context.Context, c *queue.Client) (outcome, error) {
		o := outcome{Done: "replayed", Counted: true}
		st, err := c.Stats(ctx)
		if err != nil {
			return o, err
		}
		total := int(min(st.Dead, replayAllMax))
		o.Left = int(st.Dead) - total
		// Refused ones stay dead letters, at the head of the list: skip them.
		for o.N+o.Missing+o.Refused < total {
			page, err := c.DeadLetters(ctx, o.Refused, min(bulkPage, total-o.N-o.Missing-o.Refused))
			if err != nil {
				return o, fmt.Errorf("%d replayed, then: %w", o.N, err)
			}
			if len(page) == 0 {
				break
			}
			for _, t := range page {
				switch err := c.Replay(ctx, t.ID); {
				case err == nil:
					o.N++
				case errors.Is(err, queue.ErrTaskNotFound):
					o.Missing++
				case errors.Is(err, queue.ErrUnknownTenant):
					o.Refused++
				default:
					return o, fmt.Errorf("%d replayed, then %q: %w", o.N, t.ID, err)
				}
			}
		}
		return o, nil
	})
}

// purgeDead deletes every dead letter (queue.Client.PurgeDead, a
// thousand a script call).
func (s *Handler) purgeDead(w http.ResponseWriter, r *http.Request) {
	q := "Delete every dead letter of queue " + quote(r.PathValue("queue")) + "? Their payloads and errors are lost."
	s.queueActionN(w, r, "purge", q, func(ctx context.Context, c *queue.Client) (outcome, error) {
		n, err := c.PurgeDead(ctx)
		if err != nil {
			return outcome{}, fmt.Errorf("%d purged, then: %w", n, err)
		}
		return outcome{Done: "purged", Counted: true, N: n}, nil
	})
}
