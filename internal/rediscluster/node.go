package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is one redis-server process of the cluster.
type node struct {
	cfg  *config
	path string // the redis-server executable
	dir  string
	port int // clients
	bus  int // the cluster bus (cluster-port)

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
}

func (n *node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

func (n *node) args() []string {
	args := []string{
		"--port", strconv.Itoa(n.port),
		"--cluster-port", strconv.Itoa(n.bus),
		"--bind", "127.0.0.1",
		"--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(n.dir, "nodes.conf"),
		"--cluster-node-timeout", strconv.FormatInt(n.cfg.nodeTimeout.Milliseconds(), 10),
		// A master whose last slot moves away stays a master (Redis would
		// make it a replica of the slot's new owner): the tests move
		// slots back to it.
		"--cluster-allow-replica-migration", "no",
		"--dir", n.dir,
		"--logfile", filepath.Join(n.dir, "redis.log"),
		"--daemonize", "no",
		"--save", "",
	}
	if n.cfg.replicas > 0 {
		// A master waits repl-diskless-sync-delay (5 s) for more replicas
		// before it sends a snapshot to the first: Start would wait for it.
		args = append(args, "--repl-diskless-sync-delay", "0")
	}
	if n.cfg.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	return append(args, n.cfg.args...)
}

// start starts the node. The first start picks free ports, and tries new
// ones when another process took one between the probe and the bind; a
// restart keeps its ports and its nodes.conf, so the node rejoins the
// cluster with its slots.
func (n *node) start(ctx context.Context) error {
	attempts := 1
	if n.port == 0 {
		attempts = 5
	}
	var err error
	for range attempts {
		if attempts > 1 {
			if n.port, n.bus, err = freePorts(); err != nil {
				return err
			}
		}
		if err = n.startOnce(ctx); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (n *node) startOnce(ctx context.Context) error {
	cmd := exec.Command(n.path, n.args()...)
	cmd.Dir = n.dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rediscluster: start %s: %w", n.path, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	if err := n.waitPing(ctx); err != nil {
		_ = n.kill()
		return fmt.Errorf("rediscluster: node %s: %w; log: %s", n.addr(), err, n.logTail())
	}
	return nil
}

// readyTimeout bounds how long a node may take to answer its first PING.
const readyTimeout = 15 * time.Second

// waitPing polls the node until it answers PING, it exits, ctx ends or
// readyTimeout passes.
func (n *node) waitPing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		// A plain dial first: a client would log every refused dial.
		conn, err := net.DialTimeout("tcp", n.addr(), time.Second)
		if last = err; err == nil {
			_ = conn.Close()
			c := redis.NewClient(&redis.Options{Addr: n.addr(), MaxRetries: -1, DialTimeout: time.Second})
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			last = c.Ping(pctx).Err()
			cancel()
			_ = c.Close()
			if last == nil {
				return nil
			}
		}
		select {
		case <-n.exited:
			return errors.New("redis-server exited during start")
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING: %w (last: %v)", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond): // polling a process we just started
		}
	}
}

func (n *node) logTail() string {
	b, err := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// running reports whether the node's process is alive.
func (n *node) running() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (n *node) kill() error {
	if !n.running() {
		return nil
	}
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("rediscluster: kill node %s: %w", n.addr(), err)
	}
	select {
	case <-n.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("rediscluster: node %s (pid %d) still running 10s after SIGKILL", n.addr(), n.cmd.Process.Pid)
	}
}

// pid returns the node's process id, or 0 when it is not running.
func (n *node) pid() int {
	if !n.running() {
		return 0
	}
	return n.cmd.Process.Pid
}

// freePorts asks the kernel for two free loopback ports: one for clients,
// one for the cluster bus. (The default bus port, port+10000, may lie
// beyond 65535 for a port from the ephemeral range.)
func freePorts() (port, bus int, err error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, fmt.Errorf("rediscluster: free port: %w", err)
		}
		ls = append(ls, l)
	}
	return ls[0].Addr().(*net.TCPAddr).Port, ls[1].Addr().(*net.TCPAddr).Port, nil
}
