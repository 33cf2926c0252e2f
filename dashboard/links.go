package dashboard

import (
	"html/template"
	"net/url"
	"strconv"
)

// links builds the pages' addresses under the handler's prefix, with
// names and keys escaped: the templates' links and the handlers'
// redirects all come from here, so that a dashboard mounted under a
// prefix never points outside it.
type links struct {
	prefix string // "" or "/a/b"
}

// root is the overview's address, and the cookie path.
func (l links) root() string { return l.prefix + "/" }

// static is the address of a file of assets/static.
func (l links) static(file string) string { return l.prefix + "/static/" + file }

func (l links) pool(p string) string     { return l.prefix + "/pool/" + url.PathEscape(p) }
func (l links) job(p, key string) string { return l.pool(p) + "/job/" + url.PathEscape(key) }
func (l links) queue(q string) string    { return l.prefix + "/queue/" + url.PathEscape(q) }
func (l links) task(q, id string) string { return l.queue(q) + "/task/" + url.PathEscape(id) }

// tenant is the address of a tenant's page in queue q.
func (l links) tenant(q, id string) string { return l.queue(q) + "/tenant/" + url.PathEscape(id) }

// tasks is the address of page n (from 1) of a queue's tasks in state,
// for tenant ("" for every tenant).
func (l links) tasks(q, state, tenant string, n int) string {
	v := url.Values{"state": {state}}
	if tenant != "" {
		v.Set("tenant", tenant)
	}
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	return l.queue(q) + "/tasks?" + v.Encode()
}

// jobs is the address of page n (from 1) of a pool's jobs, of worker
// ("" for every worker) whose keys start with prefix.
func (l links) jobs(p, worker, prefix string, n int) string {
	v := url.Values{}
	if worker != "" {
		v.Set("worker", worker)
	}
	if prefix != "" {
		v.Set("q", prefix)
	}
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	if len(v) == 0 {
		return l.pool(p) + "/jobs"
	}
	return l.pool(p) + "/jobs?" + v.Encode()
}

// funcs are the templates' functions that make links.
func (l links) funcs() template.FuncMap {
	return template.FuncMap{
		"rootURL":   l.root,
		"staticURL": l.static,
		"poolURL":   l.pool,
		"jobURL":    l.job,
		"queueURL":  l.queue,
		"taskURL":   l.task,
		"tasksURL":  l.tasks,
		"tenantURL": l.tenant,
		"jobsURL":   l.jobs,
	}
}

// templates returns the page templates with these links.
func (l links) templates() map[string]*template.Template {
	out := make(map[string]*template.Template, len(pages))
	for name, t := range pages {
		// pages are parsed once and never executed, so a clone cannot
		// fail; it gets its own functions.
		out[name] = template.Must(t.Clone()).Funcs(l.funcs())
	}
	return out
}
