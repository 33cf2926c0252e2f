package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/dashboard"
)

// webTokenEnv holds the dashboard's token when -token is not given, which
// keeps it out of the process list.
const webTokenEnv = "SHEPHERD_WEB_TOKEN"

// webReady, when set (tests), gets the address the dashboard listens on;
// webStop, when set, ends the command like Ctrl-C does.
var (
	webReady func(addr string)
	webStop  <-chan struct{}
)

// webOpts are the flags of web.
type webOpts struct {
	addr, listen, token string
	readonly            bool
}

func webCmd() *cobra.Command {
	var o webOpts
	cmd := &cobra.Command{
		Use:     "web",
		Short:   "serve a web dashboard of the pools and queues in a Redis",
		GroupID: groupOther,
		Args:    noArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runWeb(cmd, o) },
	}
	fs := cmd.Flags()
	redisFlag(fs, &o.addr)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "`address` to serve on; an address other than loopback needs a token, or -readonly (then anyone who reaches it reads everything)")
	fs.BoolVar(&o.readonly, "readonly", false, "show everything, offer and accept no action")
	fs.StringVar(&o.token, "token", os.Getenv(webTokenEnv), "require this `token` of every request (default $"+webTokenEnv+")")
	return cmd
}

func runWeb(cmd *cobra.Command, o webOpts) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return usagef("-listen %q: %v", o.listen, err)
	}
	loopback := isLoopback(host)
	if !loopback && o.token == "" && !o.readonly {
		return usagef("-listen %q is not a loopback address: set -token (or $%s) so that not everyone who reaches it can act on your pools, "+
			"or -readonly to let everyone who reaches it read them", o.listen, webTokenEnv)
	}
	if !loopback && o.token == "" {
		// Read-only without a token is allowed: a status page for a
		// trusted network. It offers no action, but shows job keys,
		// payloads, errors and stacks to whoever reaches it.
		fmt.Fprintf(stderr, "shepherd web: WARNING: -listen %s is not a loopback address and no token is set: anyone who reaches it can read every pool and queue "+
			"in this Redis (job keys, payloads, errors, stacks). Actions are refused (-readonly). Set -token (or $%s) to restrict who reads.\n", o.listen, webTokenEnv)
	}
	ctx, cancel := interruptible()
	defer cancel()
	rdb, err := connect(ctx, o.addr)
	if err != nil {
		return err
	}
	defer rdb.Close()
	dash, err := dashboard.New(rdb, dashboard.WithToken(o.token), dashboard.WithReadOnly(o.readonly), dashboard.WithAnyHost(!loopback),
		dashboard.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		return err
	}
	defer dash.Close()
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: dash, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url, elsewhere := browseURLs(ln.Addr().String())
	fmt.Fprintf(stdout, "shepherd web: serving %s (Redis %s)", url, redisAddr(o.addr))
	if elsewhere != "" {
		fmt.Fprintf(stdout, "; from another machine: %s", elsewhere)
	}
	if o.token != "" {
		fmt.Fprintf(stdout, "; open %s?token=YOUR-TOKEN once", url)
	}
	if o.readonly {
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
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// browseURLs returns the URL a person opens for a listen address, and
// for a wildcard address (0.0.0.0, ::, which a browser cannot open) also
// the URL from another machine, by this host's name ("" when it has
// none). A wildcard is opened on this machine at 127.0.0.1: Go's wildcard
// listeners take IPv4 too.
func browseURLs(addr string) (url, elsewhere string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/", ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if name, err := os.Hostname(); err == nil && name != "" {
			elsewhere = "http://" + net.JoinHostPort(name, port) + "/"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/", elsewhere
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
