package redistest

import "os"

// Option configures a Server.
type Option func(*config)

type config struct {
	aof       bool
	password  string
	binary    string
	args      []string
	container bool // allow the testcontainers fallback
	tls       bool
}

func defaultConfig() config {
	bin := os.Getenv("REDISTEST_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	return config{binary: bin, container: true}
}

// WithAOF turns on the append-only file with appendfsync always, so every
// acknowledged write survives Kill and Restart. Defaults to off (no
// persistence at all: --save "" --appendonly no).
func WithAOF() Option { return func(c *config) { c.aof = true } }

// WithPassword makes the server require password (requirepass). The
// Server's clients use it. Defaults to no password.
func WithPassword(password string) Option { return func(c *config) { c.password = password } }

// WithArgs appends raw redis-server arguments, for example
// WithArgs("--maxmemory", "10mb").
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithTLS makes the server speak TLS only (no plain port), with a
// certificate for 127.0.0.1 made at start time by a fresh CA; the Server's
// clients trust that CA (TLSConfig). Clients need not present
// certificates. Only a redis-server built with TLS runs it; there is no
// container fallback. Defaults to off.
func WithTLS() Option { return func(c *config) { c.tls = true } }

// WithBinary names the redis-server executable. Defaults to the
// REDISTEST_SERVER environment variable, or "redis-server" on PATH.
func WithBinary(path string) Option { return func(c *config) { c.binary = path } }

// withoutContainer disables the testcontainers fallback; the package's own
// tests use it to reach the "nothing works" error.
func withoutContainer() Option { return func(c *config) { c.container = false } }
