package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/shepherd-go/shepherd/dashboard"
)

func init() {
	commands["web"] = command{summary: "serve a web dashboard of the pools and queues in a Redis", run: runWeb}
}

// webTokenEnv holds the dashboard's token when -token is not given, which
// keeps it out of the process list.
const webTokenEnv = "SHEPHERD_WEB_TOKEN"

// webReady, when set (tests), gets the address the dashboard listens on;
// webStop, when set, ends the command like Ctrl-C does.
var (
	webReady func(addr string)
	webStop  <-chan struct{}
)

func runWeb(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("web", "web [-redis ADDR] [-listen 127.0.0.1:8080] [-readonly] [-token TOKEN]", stderr)
	addr := redisFlag(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "`address` to serve on; an address other than loopback needs a token")
	readonly := fs.Bool("readonly", false, "show everything, offer and accept no action")
	token := fs.String("token", os.Getenv(webTokenEnv), "require this `token` of every request (default $"+webTokenEnv+")")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected arguments %q", fs.Args())
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return usageError(fs, stderr, "-listen %q: %v", *listen, err)
	}
	loopback := isLoopback(host)
	if !loopback && *token == "" {
		return usageError(fs, stderr, "-listen %q is not a loopback address: set -token (or $%s) so that not everyone who reaches it can act on your pools", *listen, webTokenEnv)
	}
	ctx, cancel := interruptible()
	defer cancel()
	rdb, err := connect(ctx, *addr)
	if err != nil {
		return fail(stderr, "web", err)
	}
	defer rdb.Close()
	dash, err := dashboard.New(rdb, dashboard.WithToken(*token), dashboard.WithReadOnly(*readonly), dashboard.WithAnyHost(!loopback),
		dashboard.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		return fail(stderr, "web", err)
	}
	defer dash.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(stderr, "web", err)
	}
	srv := &http.Server{Handler: dash, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(stdout, "shepherd web: serving %s (Redis %s)", url, rdb.Options().Addr)
	if *token != "" {
		fmt.Fprintf(stdout, "; open %s?token=YOUR-TOKEN once", url)
	}
	if *readonly {
		fmt.Fprint(stdout, "; read-only")
	}
	fmt.Fprintln(stdout)
	if webReady != nil {
		webReady(ln.Addr().String())
	}
	select {
	case err = <-served:
	case <-ctx.Done():
	case <-webStop:
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if serr := srv.Shutdown(sctx); serr != nil && err == nil {
		err = serr
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(stderr, "web", err)
	}
	return exitOK
}

// isLoopback reports whether a listen host keeps the dashboard on this
// machine: localhost or a loopback IP ("" and 0.0.0.0 listen everywhere).
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
