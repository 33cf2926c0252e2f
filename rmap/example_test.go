package rmap_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/shepherd-go/shepherd/rmap"
)

func ExampleJoin() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := rmap.NewTestClient() // any redis.UniversalClient
	name := unique("workers")

	// Two processes join the same map; here both are in one process.
	a, err := rmap.Join(ctx, rdb, name, rmap.WithHashTag("pool-1"))
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := rmap.Join(ctx, rdb, name, rmap.WithHashTag("pool-1"))
	if err != nil {
		panic(err)
	}
	defer b.Close()

	if _, err := a.Set(ctx, "worker-1", "alive"); err != nil {
		panic(err)
	}
	v, ok := a.Get("worker-1") // read your writes: no wait needed
	fmt.Println(v, ok)

	if err := b.Sync(ctx); err != nil { // see other processes' writes now
		panic(err)
	}
	fmt.Println(b.Keys(), b.Len())
	if _, err := b.Destroy(ctx); err != nil {
		panic(err)
	}
	// Output:
	// alive true
	// [worker-1] 1
}

func ExampleMap_TestAndSet() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := rmap.Join(ctx, rmap.NewTestClient(), unique("ExampleTestAndSet"))
	if err != nil {
		panic(err)
	}
	defer m.Destroy(ctx)

	// Claim a job: only one claimant wins, the others learn the owner.
	r, _ := m.SetIfNotExists(ctx, "job-42", "worker-1")
	fmt.Println("worker-1 claimed:", r.Applied)
	r, _ = m.SetIfNotExists(ctx, "job-42", "worker-2")
	fmt.Println("worker-2 claimed:", r.Applied, "owner:", r.Prev)

	// Hand it over only if worker-1 still owns it.
	r, _ = m.TestAndSet(ctx, "job-42", "worker-1", "worker-2")
	fmt.Println("moved:", r.Applied)
	r, _ = m.TestAndSet(ctx, "job-42", "worker-1", "worker-3")
	fmt.Println("stale move:", r.Applied, "owner:", r.Prev)
	// Output:
	// worker-1 claimed: true
	// worker-2 claimed: false owner: worker-1
	// moved: true
	// stale move: false owner: worker-2
}

func ExampleMap_AppendUniqueValues() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := rmap.Join(ctx, rmap.NewTestClient(), unique("ExampleAppendUnique"))
	if err != nil {
		panic(err)
	}
	defer m.Destroy(ctx)

	added, _ := m.AppendUniqueValues(ctx, "worker-1", "job-a", "job-b")
	fmt.Println("added", added)
	added, _ = m.AppendUniqueValues(ctx, "worker-1", "job-b")
	fmt.Println("added", added)
	removed, _ := m.RemoveValues(ctx, "worker-1", "job-a")
	fmt.Println("removed", removed)
	jobs, _ := m.GetValues("worker-1")
	fmt.Println(jobs)
	// Output:
	// added 2
	// added 0
	// removed 1
	// [job-b]
}

func ExampleMap_Subscribe() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := rmap.Join(ctx, rmap.NewTestClient(), unique("ExampleSubscribe"))
	if err != nil {
		panic(err)
	}
	defer m.Destroy(ctx)
	events, stop := m.Subscribe()
	defer stop()

	_, _ = m.Set(ctx, "shutdown", "1")
	_, _ = m.Delete(ctx, "shutdown")
	for range 2 {
		e := <-events
		fmt.Println(e.Kind, e.Key, e.Value, e.Rev)
	}
	// Output:
	// set shutdown 1 1
	// delete shutdown 1 2
}

// unique returns a map name no other example or test uses.
func unique(prefix string) string { return prefix + "-" + rand.Text() }

// A cache of something derived from the map, rebuilt only when the local
// copy changed: Version is cheap, Snapshot copies.
func ExampleMap_Snapshot() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := rmap.Join(ctx, rmap.NewTestClient(), unique("slots"))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	var cached int
	var cachedAt uint64
	derive := func() int {
		if v := m.Version(); v == cachedAt && cachedAt != 0 {
			return cached // unchanged since the last build
		}
		data, _, version := m.Snapshot()
		cached, cachedAt = len(data), version
		return cached
	}
	if _, err := m.Set(ctx, "0", "worker-a"); err != nil {
		panic(err)
	}
	fmt.Println(derive())
	fmt.Println(derive()) // from the cache
	if _, err := m.Set(ctx, "1", "worker-b"); err != nil {
		panic(err)
	}
	fmt.Println(derive())
	if _, err := m.Destroy(ctx); err != nil {
		panic(err)
	}
	// Output:
	// 1
	// 1
	// 2
}

// After a Redis failover, a process makes its copies follow the new
// master: a pool node does it for its maps when it sees the master's
// replication id change.
func ExampleMap_Resync() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := rmap.NewTestClient()
	m, err := rmap.Join(ctx, rdb, unique("slots"), rmap.WithHashTag("pool-2"))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if _, err := m.Set(ctx, "0", "worker-1"); err != nil {
		panic(err)
	}
	m.Resync(ctx) // subscribes again and reloads, in the background
	if err := m.Sync(ctx); err != nil {
		panic(err)
	}
	fmt.Println(m.Get("0"))
	if _, err := m.Destroy(ctx); err != nil {
		panic(err)
	}
	// Output: worker-1 true
}
