package rediscluster

import "time"

// Option configures a Cluster.
type Option func(*config)

type config struct {
	server, cli string
	aof         bool
	replicas    int
	nodeTimeout time.Duration
	args        []string
}

// DefaultNodeTimeout is the nodes' cluster-node-timeout: how long a node
// may be unreachable before the others count it as failing. It only
// matters to tests that kill a node; it is not so short that a busy test
// machine makes a live node look dead.
const DefaultNodeTimeout = 2 * time.Second

func defaultConfig() config {
	return config{server: "redis-server", cli: "redis-cli", nodeTimeout: DefaultNodeTimeout}
}

// WithBinaries names the redis-server and redis-cli executables; an empty
// string keeps the default. Defaults to "redis-server" and "redis-cli" on
// PATH.
func WithBinaries(server, cli string) Option {
	return func(c *config) {
		if server != "" {
			c.server = server
		}
		if cli != "" {
			c.cli = cli
		}
	}
}

// WithAOF turns on every node's append-only file with appendfsync always,
// so acknowledged writes survive Kill and Restart. Defaults to off (no
// persistence at all: --save "" --appendonly no).
func WithAOF() Option { return func(c *config) { c.aof = true } }

// WithReplicas gives every master r replicas: Start launches
// masters×(1+r) nodes and joins them with `redis-cli --cluster create
// --cluster-replicas r`, and a killed master's slots pass to one of its
// replicas after the node timeout (see WaitFailover). The replicas sync
// at once (repl-diskless-sync-delay 0, not Redis's 5 s). A negative r
// makes Start fail. Defaults to 0: masters only.
func WithReplicas(r int) Option { return func(c *config) { c.replicas = r } }

// WithNodeTimeout sets cluster-node-timeout. Defaults to
// DefaultNodeTimeout (2 s).
func WithNodeTimeout(d time.Duration) Option { return func(c *config) { c.nodeTimeout = d } }

// WithArgs appends raw redis-server arguments to every node's command
// line, for example WithArgs("--maxclients", "10000").
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}
