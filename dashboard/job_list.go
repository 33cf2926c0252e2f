package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/shepherd-go/shepherd/pool"
)

// jobListView is a page of a pool's jobs.
type jobListView struct {
	Pool     string `json:"pool"`
	Worker   string `json:"worker,omitempty"`
	Prefix   string `json:"q,omitempty"`
	Page     int    `json:"page"`
	PageSize int    `json:"page_size"`
	// Total counts the jobs that match the filters, on every page.
	Total int             `json:"total"`
	Jobs  []*pool.JobInfo `json:"jobs"`
	More  bool            `json:"more"`
	Prev  string          `json:"-"`
	Next  string          `json:"-"`
	All   string          `json:"-"` // the list without filters
}

// jobList serves a page of a pool's jobs, by key, listPageSize a page
// (?page=, from 1): of one worker (?worker=) or all, whose keys start
// with ?q=. When ?q= names a job and no other key starts with it, it
// redirects to the job's page. A page costs an Inspect of the pool
// (O(jobs), as the pool page), its keys, and one InspectJob a row.
func (s *Handler) jobList(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("pool")
	qs := r.URL.Query()
	n, ok := s.pageNumber(w, r)
	if !ok {
		return
	}
	ctx, cancel := readCtx(r)
	defer cancel()
	st, ok := s.inspectPool(ctx, w, r, name)
	if !ok {
		return
	}
	v := jobListView{Pool: name, Worker: qs.Get("worker"), Prefix: qs.Get("q"), Page: n, PageSize: listPageSize,
		Jobs: []*pool.JobInfo{}, All: s.links.jobs(name, "", "", 1)}
	var keys []string
	if v.Worker == "" {
		var err error
		if keys, err = pool.JobKeys(ctx, s.rdb, name); err != nil {
			s.fail(w, r, http.StatusBadGateway, err.Error())
			return
		}
	} else {
		for _, ws := range st.Workers {
			if ws.ID == v.Worker {
				keys = ws.Keys
			}
		}
	}
	if v.Prefix != "" {
		var match []string
		for _, k := range keys {
			if strings.HasPrefix(k, v.Prefix) {
				match = append(match, k)
			}
		}
		keys = match
		if len(keys) == 1 && keys[0] == v.Prefix {
			http.Redirect(w, r, s.links.job(name, v.Prefix), http.StatusSeeOther)
			return
		}
	}
	v.Total = len(keys)
	from := min((n-1)*listPageSize, len(keys))
	to := min(from+listPageSize, len(keys))
	for _, key := range keys[from:to] {
		job, err := pool.InspectJob(ctx, s.rdb, name, key)
		switch {
		case errors.Is(err, pool.ErrJobNotFound): // stopped since the keys were read
			continue
		case err != nil:
			s.fail(w, r, http.StatusBadGateway, err.Error())
			return
		}
		job.Payload = nil // the job's page shows it
		v.Jobs = append(v.Jobs, job)
	}
	v.More = to < len(keys)
	if n > 1 {
		v.Prev = s.links.jobs(name, v.Worker, v.Prefix, n-1)
	}
	if v.More {
		v.Next = s.links.jobs(name, v.Worker, v.Prefix, n+1)
	}
	s.render(w, r, "jobs", page{Title: "jobs of pool " + name, View: v,
		Crumbs: []crumb{{"pool " + name, s.links.pool(name)}, {"jobs", ""}}})
}
