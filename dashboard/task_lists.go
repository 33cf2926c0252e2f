package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/shepherd-go/shepherd/queue"
)

// listPageSize is how many rows a page of a task or job list shows.
const listPageSize = 50

// filterChunk is how many tasks a tenant-filtered list reads at a time.
const filterChunk = 500

// taskStates are the states a queue's task lists show, in the order the
// pages link them, with their names on the pages. Done and cancelled
// tasks are kept (within their retention) under their id only, in no
// list the queue indexes: they are reached by the id search.
var taskStates = []struct {
	State queue.State
	Name  string
}{
	{queue.StateWaiting, "available"},
	{queue.StateDelayed, "delayed"},
	{queue.StateRetrying, "retrying"},
	{queue.StateActive, "in flight"},
	{queue.StateDead, "dead letters"},
}

// stateName returns the page name of a listed state, or "" when it has
// no list.
func stateName(st queue.State) string {
	for _, s := range taskStates {
		if s.State == st {
			return s.Name
		}
	}
	return ""
}

// stateTab is a link to a state's list on a task list page.
type stateTab struct {
	Name, URL string
	Current   bool
}

// taskListView is a page of a queue's tasks in one state.
type taskListView struct {
	Queue    string           `json:"queue"`
	State    string           `json:"state"`
	Tenant   string           `json:"tenant,omitempty"`
	Page     int              `json:"page"`
	PageSize int              `json:"page_size"`
	Tasks    []queue.TaskInfo `json:"tasks"`
	// More tells whether a next page has tasks.
	More bool `json:"more"`
	// NotFound says that the id searched for is no task of the queue.
	NotFound string     `json:"not_found,omitempty"`
	Name     string     `json:"-"`
	Tenants  []string   `json:"-"` // the registered tenants, offered by the filter
	Tabs     []stateTab `json:"-"`
	Prev     string     `json:"-"`
	Next     string     `json:"-"`
}

// taskList serves a page of a queue's tasks in one state (?state=,
// waiting unless given), listPageSize a page (?page=, from 1), of one
// tenant (?tenant=) or all. ?id= searches for a task: found, it
// redirects to the task's page; else the list says so, with 404. A
// page costs O(page × size) reads; filtered by tenant, O(tasks before
// the page's end) in the state.
func (s *Handler) taskList(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	qs := r.URL.Query()
	state := queue.State(qs.Get("state"))
	if state == "" {
		state = queue.StateWaiting
	}
	if stateName(state) == "" {
		s.fail(w, r, http.StatusBadRequest, "no list of tasks in state "+quote(string(state))+": the lists are waiting, delayed, retry, active and dead")
		return
	}
	n, ok := s.pageNumber(w, r)
	if !ok {
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	c, ok := s.queueClient(ctx, w, r, name)
	if !ok {
		return
	}
	v := taskListView{Queue: name, State: string(state), Tenant: qs.Get("tenant"), Page: n, PageSize: listPageSize,
		Tasks: []queue.TaskInfo{}, Name: stateName(state)}
	code := http.StatusOK
	if id := qs.Get("id"); id != "" {
		_, err := c.Inspect(ctx, id)
		switch {
		case err == nil:
			http.Redirect(w, r, s.links.task(name, id), http.StatusSeeOther)
			return
		case errors.Is(err, queue.ErrTaskNotFound), errors.Is(err, queue.ErrInvalidOption):
			code, v.NotFound = http.StatusNotFound, "task "+quote(id)+" not found in queue "+quote(name)+": never submitted, or finished longer ago than its retention"
		default:
			s.fail(w, r, http.StatusBadGateway, err.Error())
			return
		}
	}
	tasks, more, err := pageOfTasks(ctx, c, state, v.Tenant, (n-1)*listPageSize)
	if err == nil {
		var tenants []queue.TenantInfo
		tenants, err = c.Tenants(ctx)
		for _, t := range tenants {
			v.Tenants = append(v.Tenants, t.ID)
		}
	}
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	v.Tasks = append(v.Tasks, tasks...)
	v.More = more
	for _, st := range taskStates {
		v.Tabs = append(v.Tabs, stateTab{st.Name, s.links.tasks(name, string(st.State), v.Tenant, 1), st.State == state})
	}
	if n > 1 {
		v.Prev = s.links.tasks(name, v.State, v.Tenant, n-1)
	}
	if more {
		v.Next = s.links.tasks(name, v.State, v.Tenant, n+1)
	}
	s.renderCode(w, r, code, "tasks", page{Title: v.Name + " of queue " + name, View: v,
		Crumbs: []crumb{{"queue " + name, s.links.queue(name)}, {v.Name, ""}}})
}

// pageOfTasks returns up to listPageSize tasks in state after skipping
// offset, of tenant ("" for all), and whether more follow.
func pageOfTasks(ctx context.Context, c *queue.Client, state queue.State, tenant string, offset int) ([]queue.TaskInfo, bool, error) {
	if tenant == "" {
		tasks, err := c.Tasks(ctx, state, offset, listPageSize+1)
		if err != nil {
			return nil, false, err
		}
		if len(tasks) > listPageSize {
			return tasks[:listPageSize], true, nil
		}
		return tasks, false, nil
	}
	// No list is kept per tenant but the waiting one: read the state's
	// list in chunks, keeping the tenant's tasks.
	var out []queue.TaskInfo
	skip := offset
	for from := 0; ; from += filterChunk {
		chunk, err := c.Tasks(ctx, state, from, filterChunk)
		if err != nil {
			return nil, false, err
		}
		for _, t := range chunk {
			if t.Tenant != tenant {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			if len(out) == listPageSize {
				return out, true, nil
			}
			out = append(out, t)
		}
		if len(chunk) < filterChunk {
			return out, false, nil
		}
	}
}

// pageNumber returns the ?page= asked for (1 when none), or answers 400.
func (s *Handler) pageNumber(w http.ResponseWriter, r *http.Request) (int, bool) {
	raw := r.URL.Query().Get("page")
	if raw == "" {
		return 1, true
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 1_000_000 {
		s.fail(w, r, http.StatusBadRequest, "page must be a whole number from 1, got "+quote(raw))
		return 0, false
	}
	return n, true
}
