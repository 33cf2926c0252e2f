package dashboard

import (
	"context"
	"net/http"

	"github.com/shepherd-go/shepherd/queue"
)

// tenantView is a tenant's page: its capacity, load, rate and pause,
// its controls, and links to its tasks in each state.
type tenantView struct {
	Queue  string           `json:"queue"`
	Tenant queue.TenantInfo `json:"tenant"`
	Lists  []stateTab       `json:"-"` // its tasks, per state
}

// tenantPage serves a tenant's page (/queue/{queue}/tenant/{id}): 404
// for a tenant the queue does not list (never registered, or removed
// with no task unfinished). It costs a read of the queue's tenants.
func (s *Handler) tenantPage(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("queue"), r.PathValue("id")
	ctx, cancel := readCtx(r)
	defer cancel()
	c, ok := s.queueClient(ctx, w, r, name)
	if !ok {
		return
	}
	tenants, err := c.Tenants(ctx)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	v := tenantView{Queue: name}
	found := false
	for _, t := range tenants {
		if t.ID == id {
			v.Tenant, found = t, true
		}
	}
	if !found {
		s.fail(w, r, http.StatusNotFound, "tenant "+quote(id)+" not found in queue "+quote(name)+
			": never registered, or removed and none of its tasks is unfinished")
		return
	}
	for _, st := range taskStates {
		v.Lists = append(v.Lists, stateTab{Name: st.Name, URL: s.links.tasks(name, string(st.State), id, 1)})
	}
	s.render(w, r, "tenant", page{Title: "tenant " + id + " of queue " + name, Live: true, View: v,
		Crumbs: []crumb{{"queue " + name, s.links.queue(name)}, {"tenant " + id, ""}}})
}

// removeTenant takes a tenant off the queue's allow-list
// (queue.Client.RemoveTenant), and returns to the queue's page: the
// tenant's own page lasts only while its tasks are unfinished.
func (s *Handler) removeTenant(w http.ResponseWriter, r *http.Request) {
	id, ok := s.formTenant(w, r)
	if !ok {
		return
	}
	name := r.PathValue("queue")
	s.queueActionN(w, r, "remove tenant", "Remove tenant "+quote(id)+" from queue "+quote(name)+
		"? Submit, Replay and Acquire refuse it from now on; its unfinished tasks still run, within its last capacity.",
		func(ctx context.Context, c *queue.Client) (outcome, error) {
			return outcome{Done: "tenant-removed", To: s.links.queue(name)}, c.RemoveTenant(ctx, id)
		})
}

// tenantForm is what the tenant control templates (parts.html) get: a
// tenant, and from=tenant when they are on its page, so that an action
// returns there (returnTo).
type tenantForm struct {
	Queue  string
	Tenant queue.TenantInfo
	CSRF   string
	From   string
}

func newTenantForm(q string, t queue.TenantInfo, csrf, from string) tenantForm {
	return tenantForm{q, t, csrf, from}
}
