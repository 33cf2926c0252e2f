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

// filterScanMax bounds how many tasks of a state a tenant-filtered list
// reads for one page: past it, the page says that it stopped looking,
// rather than read a list of millions within one request.
const filterScanMax = 20_000

// taskStates are the states a queue's task lists show, in the order the
// pages link them, with their names on the pages. Done and cancelled
// lists hold the latest 10,000 finished tasks whose outcome is still
// kept (queue.Client.Tasks); an older one is still found by the id
// search of the queue page, within its retention.
var taskStates = []struct {
	State queue.State
	Name  string
}{
	{queue.StateWaiting, "available"},
	{queue.StateDelayed, "delayed"},
	{queue.StateRetrying, "retrying"},
	{queue.StateActive, "in flight"},
	{queue.StateDone, "done"},
	{queue.StateCancelled, "cancelled"},
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

// cancellable reports whether a list's tasks can be cancelled: the
// unfinished ones.
func cancellable(st queue.State) bool {
	switch st {
	case queue.StateWaiting, queue.StateDelayed, queue.StateRetrying, queue.StateActive:
		return true
	}
	return false
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
	// Capped says that a tenant's list stopped looking after
	// filterScanMax tasks of the state: more of its tasks may follow.
	Capped  bool `json:"capped,omitempty"`
	ScanMax int  `json:"-"` // filterScanMax, for the page
	// NotFound says that the id searched for is not in this list: no
	// task of the queue, or one in another state or of another tenant.
	NotFound string `json:"not_found,omitempty"`
	// Elsewhere is the page of the task searched for when it is in
	// another list.
	Elsewhere string `json:"-"`
	Name      string `json:"-"`
	// TenantKnown: the tenant filtered by is registered (or removed with
	// tasks unfinished) and has a page.
	TenantKnown bool       `json:"-"`
	Tenants     []string   `json:"-"` // the registered tenants, offered by the filter
	Tabs        []stateTab `json:"-"`
	Prev        string     `json:"-"`
	Next        string     `json:"-"`
	Cancel      bool       `json:"-"` // the rows can be selected and cancelled
	Dead        bool       `json:"-"` // the rows are dead letters: replay, delete, purge
}

// taskList serves a page of a queue's tasks in one state (?state=,
// waiting unless given), listPageSize a page (?page=, from 1), of one
// tenant (?tenant=) or all. ?id= searches for a task: in this list (the
// state, and the tenant when filtered), it redirects to the task's page;
// else the list says so, with 404, and links the task when it is in
// another. Without ?state= the search looks in the whole queue. A page
// costs O(page × size) reads; filtered by tenant, what
// queue.Client.TenantTasks costs.
func (s *Handler) taskList(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	qs := r.URL.Query()
	anywhere := qs.Get("state") == ""
	state := queue.State(qs.Get("state"))
	if anywhere {
		state = queue.StateWaiting
	}
	if stateName(state) == "" {
		s.fail(w, r, http.StatusBadRequest, "no list of tasks in state "+quote(string(state))+": the lists are waiting, delayed, retry, active, done, cancelled and dead")
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
		Tasks: []queue.TaskInfo{}, Name: stateName(state), Cancel: cancellable(state), Dead: state == queue.StateDead, ScanMax: filterScanMax}
	code := http.StatusOK
	if id := qs.Get("id"); id != "" {
		t, err := c.Inspect(ctx, id)
		switch {
		case err == nil && (anywhere || t.State == state && (v.Tenant == "" || t.Tenant == v.Tenant)):
			http.Redirect(w, r, s.links.task(name, id), http.StatusSeeOther)
			return
		case err == nil:
			code, v.Elsewhere = http.StatusNotFound, s.links.task(name, id)
			v.NotFound = "task " + quote(id) + " is not in this list: it is " + string(t.State)
			if t.Tenant != "" {
				v.NotFound += ", of tenant " + quote(t.Tenant)
			}
		case errors.Is(err, queue.ErrTaskNotFound), errors.Is(err, queue.ErrInvalidOption):
			code, v.NotFound = http.StatusNotFound, "task "+quote(id)+" not found in queue "+quote(name)+": never submitted, or finished longer ago than its retention"
		default:
			s.fail(w, r, http.StatusBadGateway, err.Error())
			return
		}
	}
	tasks, more, capped, err := pageOfTasks(ctx, c, state, v.Tenant, (n-1)*listPageSize, filterScanMax)
	if err == nil {
		var tenants []queue.TenantInfo
		tenants, err = c.Tenants(ctx)
		for _, t := range tenants {
			v.Tenants = append(v.Tenants, t.ID)
			v.TenantKnown = v.TenantKnown || t.ID == v.Tenant
		}
	}
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	v.Tasks = append(v.Tasks, tasks...)
	v.More, v.Capped = more, capped
	for _, st := range taskStates {
		v.Tabs = append(v.Tabs, stateTab{st.Name, s.links.tasks(name, string(st.State), v.Tenant, 1), st.State == state})
	}
	if n > 1 {
		v.Prev = s.links.tasks(name, v.State, v.Tenant, n-1)
	}
	if more {
		v.Next = s.links.tasks(name, v.State, v.Tenant, n+1)
	}
	crumbs := []crumb{{"queue " + name, s.links.queue(name)}, {v.Name, ""}}
	if v.TenantKnown {
		crumbs = []crumb{crumbs[0], {"tenant " + v.Tenant, s.links.tenant(name, v.Tenant)}, crumbs[1]}
	}
	s.renderCode(w, r, code, "tasks", page{Title: v.Name + " of queue " + name, View: v, Crumbs: crumbs})
}

// pageOfTasks returns up to listPageSize tasks in state after skipping
// offset, of tenant ("" for all), whether more follow, and whether it
// stopped looking for the tenant's after scanMax tasks of the state
// (only for delayed or retrying tasks queued by an earlier version:
// queue.ErrNotIndexed).
func pageOfTasks(ctx context.Context, c *queue.Client, state queue.State, tenant string, offset, scanMax int) ([]queue.TaskInfo, bool, bool, error) {
	if tenant == "" {
		tasks, err := c.Tasks(ctx, state, offset, listPageSize+1)
		if err != nil {
			return nil, false, false, err
		}
		if len(tasks) > listPageSize {
			return tasks[:listPageSize], true, false, nil
		}
		return tasks, false, false, nil
	}
	// The tenant's own lists and sets (queue.Client.TenantTasks): exact
	// at any depth.
	tasks, err := c.TenantTasks(ctx, tenant, state, offset, listPageSize+1)
	switch {
	case err == nil && len(tasks) > listPageSize:
		return tasks[:listPageSize], true, false, nil
	case err == nil:
		return tasks, false, false, nil
	case !errors.Is(err, queue.ErrNotIndexed):
		return nil, false, false, err
	}
	// Delayed or retrying tasks of an earlier version, which kept no
	// per-tenant sets: read the state's list in chunks, keeping the
	// tenant's tasks, up to scanMax.
	var out []queue.TaskInfo
	skip := offset
	for from := 0; from < scanMax; from += filterChunk {
		chunk, err := c.Tasks(ctx, state, from, filterChunk)
		if err != nil {
			return nil, false, false, err
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
				return out, true, false, nil
			}
			out = append(out, t)
		}
		if len(chunk) < filterChunk {
			return out, false, false, nil
		}
	}
	return out, false, true, nil
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
