package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/queue"
)

// chaosCapacities are TestChaosTenantCaps's tenants and their capacity.
var chaosCapacities = map[string]int{"c1": 1, "c3": 3, "c10": 10}

// TestChaosTenantCaps serves tenants of capacity 1, 3 and 10 from three
// processes of three workers (every other one taking tasks ahead) while
// one is killed and one paused past the TTL, and proves from the log
// that no tenant ever had more tasks running than its capacity, and that
// every task completed.
func TestChaosTenantCaps(t *testing.T) {
	t.Parallel()
	chaosTenantCaps(t)
}

// TestChaosTenantCapsSharded is TestChaosTenantCaps on a queue of 3
// shards (c10 on shard 0, c1 and c3 on shard 1).
func TestChaosTenantCapsSharded(t *testing.T) {
	t.Parallel()
	chaosTenantCaps(t, queue.WithShards(3))
}

func chaosTenantCaps(t *testing.T, opts ...queue.Option) {
	c := newQueueCluster(t, 3, opts...)
	ctx := ctxFor(t, 5*time.Minute)
	for ten, capacity := range chaosCapacities {
		require.NoError(t, c.sub.SetTenant(ctx, ten, capacity))
	}
	var (
		mu       sync.Mutex
		tenantOf = map[string]string{} // task id → tenant
		futures  []*queue.Future
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	tenants := []string{"c1", "c3", "c10", "c10", "c10"} // c10 submits most
	for i, ten := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pending []*queue.Future
			for n := 0; ; n++ {
				if !throttle(&pending, 30, stop) {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				id := fmt.Sprintf("%s-%d-%d", ten, i, n)
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				f, err := c.sub.Submit(sctx, []byte("ok"), queue.WithTaskID(id), queue.WithTenant(ten), queue.WithMaxAttempts(20))
				cancel()
				if err != nil {
					continue // Redis is not restarted here: a failure is a timeout under load
				}
				mu.Lock()
				tenantOf[id] = ten
				futures = append(futures, f)
				mu.Unlock()
				pending = append(pending, f)
			}
		}()
	}

	end := time.Now().Add(faultPhase(3 * time.Second))
	kills, pauses := 0, 0
	for round := 0; time.Now().Before(end) || round == 0; round++ {
		time.Sleep(500 * time.Millisecond)
		c.killOne(ctx)
		kills++
		time.Sleep(500 * time.Millisecond)
		c.pauseOne(ctx)
		pauses++
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, f := range futures {
		_, err := waitFuture(f, 60*time.Second)
		require.NoError(t, err, "task %s", f.ID())
	}
	entries, err := c.log.Read(ctx)
	require.NoError(t, err)
	peaks, over := checkCaps(entries, tenantOf, chaosCapacities)
	t.Logf("%d tasks of 3 tenants, %d kills, %d pauses; most running at once: %v", len(futures), kills, pauses, peaks)
	if !assert.Empty(t, over, "a tenant ran more tasks at once than its capacity") {
		for _, e := range entries {
			if ten := tenantOf[e.Key]; ten == "c1" || e.Key == "" {
				t.Logf("%s %s %s %s att=%s", time.UnixMilli(e.Ms).UTC().Format("15:04:05.000"), e.Event, e.Proc, e.Key, e.Worker)
			}
		}
	}
	for ten, capacity := range chaosCapacities {
		assert.Positive(t, peaks[ten], "tenant %s never ran", ten)
		assert.LessOrEqual(t, peaks[ten], capacity)
	}
	all, err := c.sub.Tenants(ctx)
	require.NoError(t, err)
	for _, ti := range all {
		assert.Zero(t, ti.Load, "tenant %s: capacity still taken after every task ended", ti.ID)
	}
}

// checkCaps replays the log: each task's attempt runs from its start to
// its end, or to the kill or freeze of its process if that came first (a
// frozen process runs nothing). An attempt a paused process goes on with
// after its thaw, once a later attempt of the task started elsewhere, is
// the documented stale run (the process was paused after it began the
// attempt; its outcome is refused): capacity counts the attempts Redis
// admitted, so it is not counted. It returns each tenant's most attempts
// running at once, and the moments it was over its capacity.
func checkCaps(entries []Entry, tenantOf map[string]string, capacities map[string]int) (map[string]int, []string) {
	type edge struct {
		ms    int64
		delta int
		ten   string
	}
	var edges []edge
	latest := map[string]int{}    // task → the highest attempt started so far
	stale := map[[3]string]bool{} // proc, task, attempt
	for _, e := range entries {
		if e.Event != EvTaskStart {
			continue
		}
		att, _ := strconv.Atoi(e.Worker)
		if att < latest[e.Key] {
			stale[[3]string{e.Proc, e.Key, e.Worker}] = true
		}
		latest[e.Key] = max(latest[e.Key], att)
	}
	open := map[string]map[string]string{} // proc → task → tenant
	closeAll := func(proc string, ms int64) {
		for _, ten := range open[proc] {
			edges = append(edges, edge{ms, -1, ten})
		}
		delete(open, proc)
	}
	for _, e := range entries {
		switch e.Event {
		case EvTaskStart:
			ten, ok := tenantOf[e.Key]
			if !ok || stale[[3]string{e.Proc, e.Key, e.Worker}] {
				continue
			}
			if open[e.Proc] == nil {
				open[e.Proc] = map[string]string{}
			}
			open[e.Proc][e.Key] = ten
			edges = append(edges, edge{e.Ms, +1, ten})
		case EvTaskEnd:
			if ten, ok := open[e.Proc][e.Key]; ok {
				delete(open[e.Proc], e.Key)
				edges = append(edges, edge{e.Ms, -1, ten})
			}
		case EvKill, EvFreeze:
			closeAll(e.Proc, e.Ms)
		}
	}
	// Ends before starts at the same millisecond: the log's clock has
	// millisecond steps, and a slot freed and taken again within one must
	// not look like two at once.
	sort.SliceStable(edges, func(i, j int) bool {
		if edges[i].ms != edges[j].ms {
			return edges[i].ms < edges[j].ms
		}
		return edges[i].delta < edges[j].delta
	})
	now, peaks := map[string]int{}, map[string]int{}
	var over []string
	for _, e := range edges {
		now[e.ten] += e.delta
		peaks[e.ten] = max(peaks[e.ten], now[e.ten])
		if now[e.ten] > capacities[e.ten] {
			over = append(over, fmt.Sprintf("%s: %d at %v", e.ten, now[e.ten], time.UnixMilli(e.ms).UTC().Format("15:04:05.000")))
		}
	}
	return peaks, over
}

func TestCheckCaps(t *testing.T) {
	ev := func(ms int64, event, proc, key, att string) Entry {
		return Entry{Event: event, Proc: proc, Key: key, Worker: att, Ms: ms}
	}
	tenantOf := map[string]string{"a": "t", "b": "t", "c": "t"}
	caps := map[string]int{"t": 1}
	// One at a time; a frozen process's attempt ends at the freeze; its
	// stale run after the thaw, behind a later attempt elsewhere, does
	// not count.
	ok := []Entry{
		ev(1, EvTaskStart, "p1", "a", "1"), ev(2, EvFreeze, "p1", "", ""),
		ev(5, EvTaskStart, "p2", "a", "2"), ev(6, EvThaw, "p1", "", ""),
		ev(7, EvTaskStart, "p1", "a", "1"), ev(8, EvTaskEnd, "p1", "a", "1"),
		ev(9, EvTaskEnd, "p2", "a", "2"), ev(9, EvTaskStart, "p2", "b", "1"),
		ev(10, EvKill, "p2", "", ""), ev(12, EvTaskStart, "p3", "b", "2"), ev(13, EvTaskEnd, "p3", "b", "2"),
	}
	peaks, over := checkCaps(ok, tenantOf, caps)
	assert.Empty(t, over)
	assert.Equal(t, 1, peaks["t"])
	// Two tasks of the tenant at once is caught.
	bad := []Entry{ev(1, EvTaskStart, "p1", "a", "1"), ev(2, EvTaskStart, "p2", "c", "1"),
		ev(3, EvTaskEnd, "p1", "a", "1"), ev(4, EvTaskEnd, "p2", "c", "1")}
	peaks, over = checkCaps(bad, tenantOf, caps)
	assert.Len(t, over, 1)
	assert.Equal(t, 2, peaks["t"])
}
