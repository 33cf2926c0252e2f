package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// childProc is this command run again as a helper process (bench-worker,
// bench-queue-worker, demo-queue-worker): it prints "ready" once it works,
// and leaves when its stdin closes.
type childProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when its stdout ended
}

// startSelf starts this program with args and waits until the child
// prints "ready"; onLine, when not nil, gets every later line of its
// stdout.
func startSelf(ctx context.Context, onLine func(string), args ...string) (*childProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), benchChildEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &childProc{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() { // owned by c: ends when the child's stdout closes, which stop waits for
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			switch {
			case sc.Text() == "ready":
				close(ready)
			case onLine != nil:
				onLine(sc.Text())
			}
		}
	}()
	select {
	case <-ready:
		return c, nil
	case <-c.done:
		c.stop()
		return nil, fmt.Errorf("%s exited before it was ready", args[0])
	case <-time.After(30 * time.Second):
		c.stop()
		return nil, fmt.Errorf("%s not ready after 30s", args[0])
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
}

// kill sends SIGKILL: the process dies without a word to Redis.
func (c *childProc) kill() error {
	return c.cmd.Process.Kill()
}

// stop asks the child to leave (its stdin closes), kills it if it has not
// left after a while, and waits for it.
func (c *childProc) stop() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	_ = c.cmd.Wait()
}
