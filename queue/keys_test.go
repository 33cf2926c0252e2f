package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Once every process of a queue has closed and every outcome's retention
// has passed, the queue keeps only what defines it and what a user set:
// its settings, and its tenant registry (capacities only) while a tenant
// is registered (docs/redis.md, "What stays in Redis", lists them). It used to keep
// its unfinished-task count and its tenants hash (the untenanted tasks'
// load, at 0) for ever, even when it never had a tenant.
func TestAClosedQueueKeepsOnlyItsSettingsAndTenantRegistry(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	const keep = 20 * time.Millisecond // every outcome's retention
	doc, err := os.ReadFile("../docs/redis.md")
	require.NoError(t, err)
	redisDoc := string(doc)
	for _, withTenants := range []bool{false, true} {
		name := redistest.Name(t)
		serving := open(t, name, WithTTL(MinTTL))
		submitting := open(t, name)
		if withTenants {
			require.NoError(t, submitting.SetTenant(ctx, "kept", 2))
			require.NoError(t, submitting.SetTenant(ctx, "removed", 1))
		}
		serve(t, serving, func(_ context.Context, task *Task) ([]byte, error) {
			switch string(task.Payload) {
			case "retry":
				if task.Attempt == 1 {
					return nil, errors.New("first attempt fails")
				}
			case "dead":
				return nil, Permanent(errors.New("a dead letter"))
			}
			return []byte("ok"), nil
		}, WithWorkers(2), fastRetries)

		var futures []*Future
		submit := func(payload string, opts ...SubmitOption) {
			t.Helper()
			f, err := submitting.Submit(ctx, []byte(payload), append(opts, WithRetention(keep))...)
			require.NoError(t, err)
			futures = append(futures, f)
		}
		submit("now")
		submit("later", WithDelay(30*time.Millisecond))
		submit("retry")
		submit("dead")
		b := submitting.NewBatch(CollectAll)
		for range 2 {
			f, err := b.Submit(ctx, []byte("batched"), WithRetention(keep))
			require.NoError(t, err)
			futures = append(futures, f)
		}
		if withTenants {
			submit("now", WithTenant("kept"))
			submit("now", WithTenant("removed"))
			slot, err := serving.Acquire(ctx, "kept")
			require.NoError(t, err)
			require.NoError(t, slot.Release(ctx))
			require.NoError(t, submitting.RemoveTenant(ctx, "removed"))
		}
		for _, f := range futures {
			_, _ = wait(t, f, 10*time.Second)
		}
		// A dead letter is the user's until replayed or purged.
		n, err := submitting.PurgeDead(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, serving.Close(ctx))
		require.NoError(t, submitting.Close(ctx))

		want := []string{serving.lay.settings}
		if withTenants {
			want = append(want, serving.lay.tenants)
		}
		var left []string
		require.Eventually(t, func() bool {
			left = left[:0]
			for _, k := range redistest.Keys(t, srv.Client(), "*{"+name+"}*") {
				if strings.HasPrefix(k, serving.lay.histPrefix) {
					// The history expires (at most a day): checked below.
					ttl, err := srv.Client().PTTL(ctx, k).Result()
					require.NoError(t, err)
					require.Positive(t, ttl, k)
					require.LessOrEqual(t, ttl, HistoryCoarseSpan, k)
					continue
				}
				left = append(left, k)
			}
			return assert.ObjectsAreEqual(want, left)
		}, 10*time.Second, 20*time.Millisecond, "with tenants %v: left %v, want %v", withTenants, &left, want)
		for _, k := range append(want, serving.lay.histPrefix+"10:", serving.lay.histPrefix+"60:") {
			_, key, _ := strings.Cut(k, "}:")
			assert.Contains(t, redisDoc, "`"+key, "docs/redis.md does not list the key %q that a closed queue keeps", key)
		}
		if withTenants {
			registry, err := srv.Client().HGetAll(ctx, serving.lay.tenants).Result()
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"c:kept": "2"}, registry, "the registry holds more than the capacities")
		}
	}
}

// A Submit withdrawn after it reached Redis (its call failed) leaves no
// key for ever: a batch whose only task it was goes; a batch whose other
// tasks have all finished expires with their outcomes; the record of the
// withdrawal expires withdrawnTTL after the last one. All three used to
// stay without an expiry.
func TestAWithdrawnSubmitLeavesNoKeyForEver(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	serve(t, q, echo, WithWorkers(1))
	ctx := testCtx(t, 10*time.Second)
	done := q.NewBatch(CollectAll)
	f, err := done.Submit(ctx, nil, WithRetention(time.Minute))
	require.NoError(t, err)
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)

	// Submits as their failed calls delivered them, then their
	// withdrawals: one into a batch of its own, one into the batch whose
	// task has finished.
	for i, b := range []string{"alone", done.ID()} {
		id, nonce := fmt.Sprint("t", i), fmt.Sprint("nonce-", i)
		res, err := submitScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs(q.proc, 100, id, "p", "1", 1, 1000, 60_000, 1000, nonce, "", b, "ca", 0, "", 0, "")...).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), res, "queued: the count of tasks")
		res, err = withdrawScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs(id, nonce, withdrawnTTL.Milliseconds())...).Result()
		require.NoError(t, err)
		require.Equal(t, "WITHDRAWN", res)
	}
	require.NoError(t, done.Wait(ctx), "the batch is complete without its withdrawn task")

	for _, k := range redistest.Keys(t, q.rdb, "*{"+q.name+"}*") {
		ttl, err := q.rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		switch k {
		case q.lay.settings, q.lay.alive, q.lay.procs, q.lay.idle:
			continue // the queue, and its process that is still open
		case q.lay.batch("alone"), q.lay.batchTasks("alone"):
			t.Errorf("%s: a batch with no task left was kept", k)
		case q.lay.withdrawn:
			assert.LessOrEqual(t, ttl, withdrawnTTL, k)
		}
		assert.Positive(t, ttl, "%s never expires", k)
	}
}
