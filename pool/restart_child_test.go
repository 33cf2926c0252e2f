package pool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// restartChildEnv makes the test binary a child process with a stable
// node id (restartChild): "redis address,pool,node id,grace".
const restartChildEnv = "SHEPHERD_POOL_RESTART_CHILD"

// restartChild is the child process's main: a node with a stable id and
// two workers whose handler prints "start KEY" and "stop KEY" lines. It
// retries AddNode while the id is in use (its predecessor was just
// killed), prints "ready", and closes the node when its stdin closes.
func restartChild() int {
	args := strings.Split(os.Getenv(restartChildEnv), ",")
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "bad", restartChildEnv)
		return 2
	}
	grace, err := time.ParseDuration(args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: args[0], ContextTimeoutEnabled: true})
	defer rdb.Close()
	h := &linePrinter{}
	deadline := time.Now().Add(20 * time.Second)
	var n *Node
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err = AddNode(ctx, rdb, args[1], fastOpts(WithNodeID(args[2]), WithRestartGrace(grace))...)
		cancel()
		if errors.Is(err, ErrNodeIDInUse) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // retry backoff
			continue
		}
		break
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for range 2 {
		if _, err := n.AddWorker(context.Background(), h); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	h.println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := n.Close(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// linePrinter is the child's handler.
type linePrinter struct{ mu sync.Mutex }

func (p *linePrinter) println(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Println(s)
}

func (p *linePrinter) Start(ctx context.Context, job *Job) error {
	p.println("start " + job.Key)
	return nil
}

func (p *linePrinter) Stop(ctx context.Context, key string) error {
	p.println("stop " + key)
	return nil
}

// childNode is a restartChild process seen from the test: the starts and
// stops it printed.
type childNode struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	rec   *recorder
}

// startChild starts a restartChild process and waits until it is ready.
func startChild(t *testing.T, pool, id string, grace time.Duration) *childNode {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%s,%s", restartChildEnv, srv.Addr(), pool, id, grace))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &childNode{cmd: cmd, stdin: stdin, done: make(chan struct{}), rec: newRecorder()}
	ready := make(chan struct{})
	go func() { // owned by c: ends with the child's stdout, which the cleanup waits for
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			verb, key, _ := strings.Cut(sc.Text(), " ")
			switch verb {
			case "ready":
				close(ready)
			case "start":
				_ = c.rec.Start(context.Background(), &Job{Key: key})
			case "stop":
				_ = c.rec.Stop(context.Background(), key)
			}
		}
	}()
	t.Cleanup(func() {
		_ = c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		_ = c.cmd.Wait()
	})
	select {
	case <-ready:
	case <-c.done:
		t.Fatal("the child exited before it was ready")
	case <-time.After(30 * time.Second):
		t.Fatal("the child was not ready after 30s")
	}
	return c
}

// A process with a stable id killed with SIGKILL and started again within
// the grace gets its jobs back: none starts elsewhere meanwhile.
func TestRestartAfterSIGKILLWithinGrace(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	other := addNode(t, srv.Client(), pool)
	ro := newRecorder()
	addWorkers(t, other, ro, 2)
	const grace = 20 * time.Second
	first := startChild(t, pool, "killed", grace)
	const jobs = 40
	dispatchN(t, other, jobs)
	require.Eventually(t, func() bool { return len(union(ro, first.rec)) == jobs }, 10*time.Second, 10*time.Millisecond)
	mine := first.rec.runningKeys()
	require.NotEmpty(t, mine)
	otherStarts := map[string]int{}
	ro.mu.Lock()
	maps.Copy(otherStarts, ro.starts)
	ro.mu.Unlock()

	killed := time.Now()
	require.NoError(t, first.cmd.Process.Kill())
	<-first.done
	second := startChild(t, pool, "killed", grace) // waits for the killed one's keep-alive to lapse
	require.Eventually(t, func() bool { return maps.Equal(second.rec.runningKeys(), mine) }, 15*time.Second, 10*time.Millisecond,
		"the restarted process runs the killed one's jobs")
	t.Logf("the jobs ran again %v after the kill (WorkerTTL 1s, grace %v)", time.Since(killed), grace)
	second.rec.mu.Lock()
	for k := range mine {
		assert.Equal(t, 1, second.rec.starts[k], "job %s started once", k)
	}
	second.rec.mu.Unlock()
	ro.mu.Lock()
	assert.Equal(t, otherStarts, ro.starts, "no job of the killed process started elsewhere")
	ro.mu.Unlock()
}
