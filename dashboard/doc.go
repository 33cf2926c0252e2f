// Package dashboard serves shepherd's web dashboard as an http.Handler
// that you mount in your own HTTP server, or run with `shepherd web`.
//
// It shows an overview of the pools and queues a Redis holds, a page per
// pool, per job, per queue, per tenant (queue/{queue}/tenant/{id}) and
// per task, a list of a queue's tasks per state
// (queue/{queue}/tasks?state=waiting|delayed|retry|active|done|cancelled|dead,
// with &page=, &tenant= and a search by task id within the list, &id=)
// and of a pool's jobs (pool/{pool}/jobs, with &page=, &worker= and the
// start of a key, &q=), 50 rows a page, each with a JSON twin
// (?format=json), and offers the operators' actions (stop a job, shut a
// pool down, replay, delete or cancel the tasks selected on a list,
// replay or purge every dead letter, set a tenant's capacity, rate or
// pause, remove a tenant, drain a queue) as POSTs that ask for
// confirmation first. It is built on
// net/http, html/template and embed alone: no build step, nothing loaded
// from elsewhere, so it works offline. Open pages fetch their live part
// again every second (?partial=1). A queue page's charts (done and failed
// per second, dead letters, handler run time and queue wait p50 and p99
// in ms, tasks by state) are drawn as SVG, with axes in their units and
// UTC times, from the history the queue's processes keep in Redis
// (queue.Client.History), over the last hour (10 s buckets) or the last
// day (1 min buckets, ?range=day): every dashboard shows the same past,
// from before it started. A pool's chart is sampled by the dashboard:
// while pages are viewed, a goroutine samples every pool, from New until
// Close.
//
// A JSON twin is in the CLI's JSON style: snake_case keys, durations in
// milliseconds under keys ending in "_ms", times RFC 3339 in UTC, a rate
// limit {"n", "per_ms", "burst"} or null.
//
// # Mounting
//
// Mount it under a path prefix of your own mux, without http.StripPrefix:
// its links, forms, redirects, static files and token cookie all stay
// under the prefix.
//
//	dash, err := dashboard.New(rdb, dashboard.WithPrefix("/ops/shepherd"), dashboard.WithToken(token))
//	if err != nil { ... }
//	defer dash.Close()
//	mux.Handle("/ops/shepherd/", dash)
//
// # Security
//
// Every request passes the same guards, mounted or not:
//
//   - Host: only loopback names (localhost, 127.0.0.1, [::1]) are answered
//     unless WithAllowedHosts or WithAnyHost says otherwise (403), which
//     keeps a web page elsewhere from reaching a dashboard on your machine
//     by DNS rebinding.
//   - Token (WithToken): without it, 401; a browser opens any page once
//     with ?token=TOKEN, which is moved to an HttpOnly, SameSite=Strict
//     cookie scoped to the prefix, and dropped from the address bar by a
//     redirect; a program sends "Authorization: Bearer TOKEN". The 401
//     page says so. The stylesheet and the script (static/), which hold no
//     secret, are served without it, so that the 401 page is styled.
//   - Read-only (WithReadOnly): no action is offered, every POST is 403.
//   - Cross-site requests: a POST needs the form's CSRF token, keyed by a
//     secret new to each Handler, and is refused when the browser says it
//     comes from another site (Sec-Fetch-Site); pages forbid framing and
//     load nothing from elsewhere (Content-Security-Policy).
//
// Serve it over TLS (your server's, or a proxy's) when it leaves the
// machine. The CSRF secret is the Handler's own: behind a load balancer
// over several replicas of your service, send a browser to one replica
// (sticky sessions), or a form rendered by one is refused by another.
package dashboard
