package dashboard

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shepherd-go/shepherd/internal/humanize"
	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/queue"
)

//go:embed assets
var assetsFS embed.FS

// staticFS serves assets/static as /static/ (under the prefix).
var staticFS = func() fs.FS {
	sub, err := fs.Sub(assetsFS, "assets")
	if err != nil {
		panic(err)
	}
	return sub
}()

// pages are the page templates, each with the layout, parsed once with
// the links of a dashboard at the root; each Handler executes clones with
// its own links (links.templates).
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"ago":      ago,
		"dur":      humanize.Duration,
		"when":     when,
		"barWidth": barWidth,
		"preview":  preview,
		"of":       of,
		"head":     head,
		"rate":     rateText,
		"proc":     procLabel,
		"attempts": attemptsHTML,
		// tenantForm makes the data of the tenant controls (parts.html).
		"tenantForm": newTenantForm,
		"lastError": func(errs []queue.AttemptError) string {
			if len(errs) == 0 {
				return "-"
			}
			return errs[len(errs)-1].Err
		},
	}
	out := map[string]*template.Template{}
	for _, name := range []string{"overview", "pool", "job", "queue", "task", "tasks", "jobs", "tenant", "confirm", "error"} {
		out[name] = template.Must(template.New(name).Funcs(funcs).Funcs(links{}.funcs()).ParseFS(assetsFS, "assets/layout.html", "assets/parts.html", "assets/schedules.html", "assets/"+name+".html"))
	}
	return out
}()

// page is what the layout gets: the page's own data is View.
type page struct {
	Title    string
	Crumbs   []crumb
	ReadOnly bool
	CSRF     string
	Flash    string
	Live     bool
	Refresh  int64 // ms between live updates
	View     any
}

// crumb is a link of the breadcrumb trail.
type crumb struct{ Name, URL string }

// flashes are the messages an action's redirect may ask for (?done=):
// a fixed list, so a link cannot make the page say anything else.
var flashes = map[string]string{
	"stopped":        "The job was stopped.",
	"shutdown":       "The pool was shut down.",
	"unscheduled":    "The schedule was removed.",
	"ticker-stopped": "The ticker was stopped.",
	"replayed":       "The dead letter was queued again.",
	"deleted":        "The dead letter was deleted.",
	"tenant":         "The tenant's capacity was set.",
	"drain":          "The queue's serving processes were asked to drain.",
	"paused":         "The queue was paused: tasks in flight finish, none starts until it is resumed.",
	"resumed":        "The queue was resumed.",
	"rate":           "The queue's rate limit was set.",
	"tenant-paused":  "The tenant was paused.",
	"tenant-resumed": "The tenant was resumed.",
	"tenant-rate":    "The tenant's rate limit was set.",
	"tenant-removed": "The tenant was removed: its unfinished tasks still run, none of its tasks is accepted.",
}

// wantsJSON reports whether r asked for a page's JSON twin.
func wantsJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

// render writes page name: its JSON twin (the view alone) with
// ?format=json, its live part alone with ?partial=1, else the whole page.
func (s *Handler) render(w http.ResponseWriter, r *http.Request, name string, p page) {
	s.renderCode(w, r, http.StatusOK, name, p)
}

// renderCode is render with the status code given.
func (s *Handler) renderCode(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	if wantsJSON(r) {
		writeJSON(w, code, p.View)
		return
	}
	p.ReadOnly, p.CSRF, p.Refresh = s.cfg.readOnly, s.csrfToken(), s.cfg.refreshEvery.Milliseconds()
	p.Flash = flashFor(r.URL.Query())
	tmpl := "layout"
	if r.URL.Query().Get("partial") == "1" {
		tmpl = "main"
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, tmpl, p); err != nil {
		s.logger.Error("dashboard: rendering", "page", name, "error", err)
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = buf.WriteTo(w)
}

// fail answers an error: a JSON object for a JSON twin or an API client,
// else an error page.
func (s *Handler) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if wantsJSON(r) || strings.Contains(r.Header.Get("Accept"), "application/json") {
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	var buf bytes.Buffer
	p := page{Title: http.StatusText(code), View: struct {
		Code int
		Msg  string
	}{code, msg}}
	if err := s.pages["error"].ExecuteTemplate(&buf, "layout", p); err != nil {
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = buf.WriteTo(w)
}

// writeJSON answers v in the CLI's JSON style (internal/jsonstyle):
// snake_case keys, durations in ms under keys ending in "_ms", times
// RFC 3339 in UTC, rates {"n","per_ms","burst"}; indented, for people
// reading a twin in a browser.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(jsonstyle.Value(v))
}

// ago renders the age of a keep-alive or an event.
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return humanize.Duration(d) + " ago"
}

// timeFormat is how every page shows a time: UTC, to the millisecond (a
// task's attempts may be milliseconds apart).
const timeFormat = "2006-01-02 15:04:05.000 UTC"

// clockFormat is the shape of the charts' time range and of app.js's
// live-state clock: UTC, to the second.
const clockFormat = "2006-01-02 15:04:05 UTC"

// when renders a time, or "-" for the zero time.
func when(t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "-"
	}
	return t.UTC().Format(timeFormat)
}

// barWidth is the width in pixels of a bar of n out of most, 120 wide.
func barWidth(n, most int64) int64 {
	if most <= 0 || n <= 0 {
		return 0
	}
	return max(1, min(120, n*120/most))
}

// previewBytes is how much of a payload a page shows.
const previewBytes = 2048

// payloadPreview is a payload as a page shows it.
type payloadPreview struct {
	Text      string
	Hex       bool
	Size      int
	Truncated bool
}

// preview returns the start of a payload: as text when it is UTF-8, else
// as a hex dump.
func preview(b []byte) payloadPreview {
	p := payloadPreview{Size: len(b)}
	if len(b) > previewBytes {
		b, p.Truncated = b[:previewBytes], true
	}
	if utf8.Valid(b) || (p.Truncated && utf8.Valid(trimPartialRune(b))) {
		p.Text = string(trimPartialRune(b))
		return p
	}
	p.Hex = true
	var sb strings.Builder
	for i := 0; i < len(b) && i < previewBytes/4; i += 16 {
		fmt.Fprintf(&sb, "%04x  % x\n", i, b[i:min(i+16, len(b))])
	}
	p.Truncated = p.Truncated || len(b) > previewBytes/4
	p.Text = sb.String()
	return p
}

// trimPartialRune drops an incomplete UTF-8 sequence cut at the end.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// barData is what the "bar" template draws: N out of Most.
type barData struct{ N, Most int64 }

// of makes a bar of n out of most, which may be any integers.
func of(n, most any) barData { return barData{toInt64(n), toInt64(most)} }

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	}
	return 0
}

// headOf is the first items of a list and how many more there are.
type headOf struct {
	Items []string
	More  int
}

// head returns the first n of s; with total, s is a sample of a list of
// total items, and More counts the others.
func head(s []string, n int, total ...int) headOf {
	all := len(s)
	if len(total) > 0 {
		all = max(all, total[0])
	}
	items := s[:min(n, len(s))]
	return headOf{Items: items, More: all - len(items)}
}

// procLabel names a process for people: "name (host:pid)" with a name
// (pool.WithName, queue.WithName), "host:pid" without, its id when its
// record says neither. The page gives the id in the label's title.
func procLabel(id, name, host string, pid int) string {
	where := ""
	if host != "" || pid != 0 {
		where = cmp.Or(host, "?") + ":" + strconv.Itoa(pid)
	}
	switch {
	case name != "" && where != "":
		return name + " (" + where + ")"
	case name != "":
		return name
	case where != "":
		return where
	}
	return id
}

// attemptsHTML writes a task's attempts, "1 / 3", and marks a dead
// letter of a permanent failure (queue.Permanent): "permanent, 1 / 3",
// so that it does not read as attempts used up.
func attemptsHTML(t queue.TaskInfo) template.HTML {
	n := template.HTMLEscapeString(fmt.Sprintf("%d / %d", t.Attempt, t.MaxAttempts))
	if !t.Permanent {
		return template.HTML(n)
	}
	return template.HTML(`<span class="badge bad permanent" title="failed with queue.Permanent: no retry">permanent</span> ` + n)
}
