package pool_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/pool"
)

// Exists and LiveWorkers are the cheap checks before acting on a pool by
// name: the shepherd command uses them so that a typo in a pool's name
// creates nothing, and a dispatch into a pool without workers says so.
func ExampleExists() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	ok, err := pool.Exists(ctx, rdb, "example-no-such-pool")
	if err != nil {
		panic(err)
	}
	fmt.Println("exists:", ok)

	node, err := pool.AddNode(ctx, rdb, "example-exists")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	ok, _ = pool.Exists(ctx, rdb, "example-exists")
	live, _ := node.LiveWorkers(ctx)
	fmt.Println("exists:", ok, "live workers:", live)
	if _, err := node.AddWorker(ctx, quiet{}); err != nil {
		panic(err)
	}
	live, _ = node.LiveWorkers(ctx)
	fmt.Println("live workers:", live)
	// Output:
	// exists: false
	// exists: true live workers: 0
	// live workers: 1
}

// A failed DispatchJob means the job does not run, and its error says why:
// here ctx ended before a worker could start it (there is none). The
// dispatch is withdrawn, even if its admission reaches Redis later.
func ExampleNode_DispatchJob_deadline() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-deadline")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = node.DispatchJob(dctx, "nobody-starts-me", nil)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// true
}

// The pool-wide settings are the pool's: a node that sets another
// WorkerTTL than the pool's live nodes use is refused.
func ExampleWithWorkerTTL() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	first, err := pool.AddNode(ctx, rdb, "example-ttl", pool.WithWorkerTTL(2*time.Second))
	if err != nil {
		panic(err)
	}
	defer first.Shutdown(ctx)
	_, err = pool.AddNode(ctx, rdb, "example-ttl", pool.WithWorkerTTL(5*time.Second))
	fmt.Println(errors.Is(err, pool.ErrInvalidOption))
	fmt.Println(err)
	st, _ := first.Stats(ctx)
	fmt.Println("the pool's WorkerTTL:", st.WorkerTTL)
	// Output:
	// true
	// pool: add node to "example-ttl": pool: invalid option: WorkerTTL: this node sets 5s but the pool uses 2s (the pool's settings change only while no other full node is live)
	// the pool's WorkerTTL: 2s
}

// ACLCommands are the commands to grant a Redis user that runs one pool
// (here "ingest"); an admin connection creates the user with these
// arguments.
func ExampleACLCommands() {
	args := []any{"ACL", "SETUSER", "shepherd", "on", ">password", "resetkeys", "resetchannels",
		"~shepherd:{ingest}:*", "&shepherd:{ingest}:*", "-@all"}
	for _, c := range strings.Fields(pool.ACLCommands) {
		args = append(args, c)
	}
	// admin.Do(ctx, args...).Err()
	fmt.Println(args[len(args)-1])
	// Output:
	// +wait
}
