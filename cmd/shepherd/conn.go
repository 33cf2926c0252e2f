package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// stdin is where confirmations are read; tests replace it.
var stdin io.Reader = os.Stdin

// errUsage marks a usage error: the command exits with exitUsage.
var errUsage = errors.New("usage")

// redisFlag registers -redis on fs: an address or a redis:// / rediss://
// URL, defaulting to $REDIS_ADDR.
func redisFlag(fs *flag.FlagSet) *string {
	return fs.String("redis", os.Getenv("REDIS_ADDR"),
		"Redis `address` (host:port) or URL (redis://[:password@]host:port/db, rediss:// for TLS); defaults to $REDIS_ADDR, else localhost:6379")
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

// connect opens a client for the -redis value and checks that Redis
// answers.
func connect(ctx context.Context, addr string) (*redis.Client, error) {
	opt, err := redisOptions(addr)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", opt.Addr, err)
	}
	return rdb, nil
}

// newFlags returns a flag set for command name that writes its usage to
// stderr, headed by synopsis.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: shepherd %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args and maps -h and bad flags to exit codes: ok is false
// when the command must return code. Flags may come before, between or
// after the positional arguments (Go's flag package alone stops at the
// first positional one, so "dispatch k9 -redis other:6379" would dispatch
// "-redis" as a key, to the default Redis); after "--" every argument is
// positional, for keys that begin with "-". fs.Args() then returns the
// positional arguments.
func parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK, false
			}
			return exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parse stops at "--" and keeps what follows as fs.Args().
	if err := fs.Parse(append([]string{"--"}, positional...)); err != nil {
		return exitUsage, false
	}
	return exitOK, true
}

// usageError prints msg and the command's usage and returns exitUsage.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "shepherd %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitUsage
}

// fail prints err and returns its exit code: exitUsage for usage errors.
func fail(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "shepherd %s: %v\n", name, err)
	if errors.Is(err, errUsage) {
		return exitUsage
	}
	return exitError
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
