package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// demoRedis is the Redis the demo runs on, and how to give it back.
type demoRedis struct {
	addr    string // for the -redis flag syntax: an address or URL
	origin  string // where it came from, for the output
	dir     string // a private redis-server's data directory, or ""
	private bool   // the demo started it, and release removes it
	release func() error
}

// demoRedisUsage is the demo's -redis help: unlike the other commands,
// the demo never talks to localhost:6379 unless told to.
const demoRedisUsage = "an existing Redis `address` (host:port) or URL (redis://[:password@]host:port/db) to write the demo's keys to; " +
	"defaults to $REDIS_ADDR, else a private redis-server child (or Docker container) removed on exit"

// errNoRedis explains what to install when the demo can start no Redis.
var errNoRedis = errors.New("no private Redis could be started: no redis-server binary in $PATH, and no Docker for testcontainers.\n" +
	"Install one of them, for instance:\n" +
	"  apt-get install redis-server      (Debian, Ubuntu)\n" +
	"  brew install redis                (macOS)\n" +
	"or point the demo at a Redis it may write to: shepherd demo -redis redis://host:6379 (or $REDIS_ADDR)")

// findRedis returns the Redis for the demo: the one given (-redis or
// $REDIS_ADDR), else a private redis-server child, else a testcontainers
// Redis, else errNoRedis. It never picks whatever answers on
// localhost:6379 by itself: that may be somebody's production Redis.
func findRedis(ctx context.Context, given string, log io.Writer) (*demoRedis, error) {
	if given != "" {
		return &demoRedis{addr: given, origin: "given by -redis/$REDIS_ADDR", release: func() error { return nil }}, nil
	}
	if path, err := exec.LookPath("redis-server"); err == nil {
		fmt.Fprintf(log, "starting a private %s (-redis or $REDIS_ADDR names an existing Redis instead)\n", path)
		return startRedisServer(ctx, path)
	}
	fmt.Fprintln(log, "no redis-server binary; trying a private Redis in Docker through testcontainers")
	r, err := startContainer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w\n(testcontainers: %v)", errNoRedis, err)
	}
	return r, nil
}

// answers reports whether a Redis answers PING at addr within a moment.
func answers(ctx context.Context, addr string) bool {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	return rdb.Ping(ctx).Err() == nil
}

// startRedisServer runs redis-server on a free loopback port with a
// temporary directory and no persistence; release stops it and deletes the
// directory.
func startRedisServer(ctx context.Context, path string) (*demoRedis, error) {
	dir, err := os.MkdirTemp("", "shepherd-demo-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	// Another process may take the free port before redis-server binds it.
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "")
		cmd.SysProcAttr = childProcAttr()
		if err := cmd.Start(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("start %s: %w", path, err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		stop := func() error {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				_ = cmd.Process.Kill() // no SIGTERM here (Windows): kill
			}
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			return os.RemoveAll(dir)
		}
		if err := waitAnswer(ctx, addr, exited); err != nil {
			lastErr = err
			_ = cmd.Process.Kill()
			<-exited
			continue
		}
		return &demoRedis{addr: addr, origin: "a private redis-server (pid " + strconv.Itoa(cmd.Process.Pid) + ") on " + addr, dir: dir, private: true, release: stop}, nil
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("start %s: %w", path, lastErr)
}

// waitAnswer waits until Redis answers at addr, the process exits or ctx
// ends.
func waitAnswer(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if answers(ctx, addr) {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited at start")
		case <-deadline.C:
			return errors.New("redis-server did not answer within 10s")
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startContainer runs Redis in Docker; release terminates the container.
func startContainer(ctx context.Context) (r *demoRedis, err error) {
	defer func() {
		// testcontainers panics when it finds no Docker at all.
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("%v", p)
		}
	}()
	ctr, err := tcredis.Run(ctx, "redis:7", testcontainers.WithCmd("redis-server", "--save", "", "--appendonly", "no"))
	if err != nil {
		return nil, err
	}
	release := func() error { return ctr.Terminate(context.Background()) }
	addr, err := ctr.Endpoint(ctx, "")
	if err != nil {
		return nil, errors.Join(err, release())
	}
	return &demoRedis{addr: addr, origin: "a private Redis container (testcontainers) at " + addr, private: true, release: release}, nil
}
