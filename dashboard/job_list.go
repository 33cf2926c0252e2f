package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
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
	// Total counts the jobs that match the filters, on every page: for a
	// large pool (Scan), the jobs of the pool or as the worker reported
	// them, and -1 (unknown) with a prefix.
	Total int             `json:"total"`
	Jobs  []*pool.JobInfo `json:"jobs"`
	More  bool            `json:"more"`
	// Scan tells a large pool's list, read page by page with
	// pool.ScanJobs in Redis's order: Cursor is this page's (?cursor=,
	// "" for the first), NextCursor the next one's ("" after the last).
	Scan       bool   `json:"scan"`
	Cursor     string `json:"cursor,omitempty"`
	NextCursor string `json:"next_cursor,omitempty"`
	Prev       string `json:"-"`
	Next       string `json:"-"`
	All        string `json:"-"` // the list without filters
}

// jobList serves a page of a pool's jobs: of one worker (?worker=) or
// all, whose keys start with ?q=. A small pool's list (pool.Summary reads
// it exactly) is sorted by key, listPageSize a page (?page=, from 1), and
// a ?q= that names a job no other key starts with redirects to the job's
// page; it costs an Inspect of the pool, its keys, and one InspectJob a
// row. A large pool's is read by pool.ScanJobs, in Redis's order, a page
// at a time (?cursor=): it costs a few reads whatever the pool's size, and
// a ?q= that names a job redirects to it.
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
	if st.Sampled || qs.Has("cursor") {
		s.scanJobList(ctx, w, r, st, v, qs.Get("cursor"))
		return
	}
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
	s.renderJobList(w, r, v)
}

// scanJobList serves a page of a large pool's jobs, from cursor on
// (pool.ScanJobs).
func (s *Handler) scanJobList(ctx context.Context, w http.ResponseWriter, r *http.Request, st *pool.Stats, v jobListView, cursor string) {
	if v.Prefix != "" && cursor == "" {
		if _, err := pool.InspectJob(ctx, s.rdb, v.Pool, v.Prefix); err == nil {
			http.Redirect(w, r, s.links.job(v.Pool, v.Prefix), http.StatusSeeOther)
			return
		}
	}
	page, err := pool.ScanJobs(ctx, s.rdb, v.Pool, pool.JobScan{Cursor: cursor, Count: listPageSize, Worker: v.Worker, Prefix: v.Prefix})
	switch {
	case errors.Is(err, pool.ErrInvalidOption):
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	v.Scan, v.Cursor, v.NextCursor, v.Jobs, v.More = true, cursor, page.Next, page.Jobs, page.Next != ""
	switch {
	case v.Prefix != "":
		v.Total = -1
	case v.Worker != "":
		for _, ws := range st.Workers {
			if ws.ID == v.Worker {
				v.Total = ws.Jobs
			}
		}
	default:
		v.Total = st.Jobs
	}
	first := s.links.jobs(v.Pool, v.Worker, v.Prefix, 1)
	if cursor != "" {
		v.Prev = first
	}
	if v.More {
		v.Next = withCursor(first, page.Next)
	}
	s.renderJobList(w, r, v)
}

// withCursor adds ?cursor= to a job list's link.
func withCursor(link, cursor string) string {
	sep := "?"
	if strings.Contains(link, "?") {
		sep = "&"
	}
	return link + sep + "cursor=" + url.QueryEscape(cursor)
}

func (s *Handler) renderJobList(w http.ResponseWriter, r *http.Request, v jobListView) {
	s.render(w, r, "jobs", page{Title: "jobs of pool " + v.Pool, View: v,
		Crumbs: []crumb{{"pool " + v.Pool, s.links.pool(v.Pool)}, {"jobs", ""}}})
}
