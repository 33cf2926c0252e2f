package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/shepherd-go/shepherd/dashboard"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// stdin is where confirmations are read; tests replace it.
var stdin io.Reader = os.Stdin

// redisFlag registers -redis on fs: an address or a redis:// / rediss://
// URL, defaulting to $REDIS_ADDR.
func redisFlag(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "redis", os.Getenv("REDIS_ADDR"),
		"Redis `address` (host:port; any node of a Redis Cluster) or URL (redis://[:password@]host:port/db, rediss:// for TLS); defaults to $REDIS_ADDR, else localhost:6379")
}

// redisOptions turns the -redis value into client options.
func redisOptions(addr string) (*redis.Options, error) {
	if addr == "" {
		addr = "localhost:6379"
	}
	if strings.Contains(addr, "://") {
		opt, err := redis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: -redis: %w", errUsage, err)
		}
		return opt, nil
	}
	return &redis.Options{Addr: addr}, nil
}

// redisAddr is the address a -redis value names, for messages.
func redisAddr(addr string) string {
	opt, err := redisOptions(addr)
	if err != nil {
		return addr
	}
	return opt.Addr
}

// connect opens a client for the -redis value and checks that Redis
// answers. A node of a Redis Cluster gives a cluster client, which finds
// the other nodes from it.
func connect(ctx context.Context, addr string) (redis.UniversalClient, error) {
	opt, err := redisOptions(addr)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		if unparsable(err) {
			return nil, fmt.Errorf("redis at %s: not a Redis server, or not one this tool can speak to (its answer: %w); is -redis the right address?", opt.Addr, err)
		}
		return nil, fmt.Errorf("redis at %s: %w", opt.Addr, err)
	}
	info, err := rdb.Info(pctx, "cluster").Result()
	if err != nil || !strings.Contains(info, "cluster_enabled:1") {
		return rdb, nil
	}
	_ = rdb.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{opt.Addr}, Username: opt.Username, Password: opt.Password, TLSConfig: opt.TLSConfig,
	})
	if err := cc.Ping(pctx).Err(); err != nil {
		_ = cc.Close()
		return nil, fmt.Errorf("redis cluster at %s: %w", opt.Addr, err)
	}
	return cc, nil
}

// unparsable reports whether err is go-redis failing to read a reply as
// Redis's protocol: what a server that is not Redis (a web server, SSH)
// answers. An error reply of Redis's (NOAUTH, WRONGPASS) is no such
// failure, nor is a network error.
func unparsable(err error) bool {
	if redisutil.ErrorCode(err) != "" {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "redis: can't parse") || strings.Contains(msg, "redis: invalid reply")
}

// interruptible returns a context cancelled by Ctrl-C.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

// confirm asks question on stderr and reads a yes from stdin.
func confirm(stderr io.Writer, question string) bool {
	fmt.Fprintf(stderr, "%s [y/N] ", question)
	// A read error (EOF: no terminal, closed stdin) leaves line short of a
	// yes, which is the safe answer.
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// notFound is the error of a command naming a pool or a queue (what)
// that Redis does not hold: it lists the names of that kind Redis holds
// (the first 20), with the closest as a suggestion.
func notFound(ctx context.Context, rdb redis.UniversalClient, what, name string) error {
	pools, queues, err := dashboard.Names(ctx, rdb)
	have := queues
	if what == "pool" {
		have = pools
	}
	switch {
	case err != nil:
		return fmt.Errorf("%s %q not found", what, name)
	case len(have) == 0:
		return fmt.Errorf("%s %q not found: this Redis holds no %s", what, name, what)
	}
	msg := fmt.Sprintf("%s %q not found", what, name)
	best, bestD := "", 3 // a suggestion within 2 edits
	for _, h := range have {
		if d := editDistance(strings.ToLower(name), strings.ToLower(h)); d < bestD {
			best, bestD = h, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", best)
	}
	const most = 20
	list := strings.Join(have[:min(len(have), most)], ", ")
	if len(have) > most {
		list += fmt.Sprintf(" and %d more (shepherd pools lists them)", len(have)-most)
	}
	return fmt.Errorf("%s; the %ss here: %s", msg, what, list)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
