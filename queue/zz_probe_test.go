package queue

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/script"
)

func usec(t *testing.T, own *redistest.Server) (calls, us int64) {
	info, _ := own.Client().Info(context.Background(), "commandstats").Result()
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "cmdstat_evalsha:") {
			for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(l, "cmdstat_evalsha:")), ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				if k == "calls" {
					calls = n
				}
				if k == "usec" {
					us = n
				}
			}
		}
	}
	return
}

func TestProbeScriptCost(t *testing.T) {
	if os.Getenv("PROBE") == "" {
		t.Skip()
	}
	own := redistest.Start(t)
	ctx := context.Background()
	q, err := Open(ctx, own.Client(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(ctx)
	time.Sleep(100 * time.Millisecond)
	for round := 0; round < 3; round++ {
		c0, u0 := usec(t, own)
		for i := 0; i < 3000; i++ {
			_, err := script.Run(ctx, q.rdb, dequeueScript, "probe", q.lay.common(q.lay.inflight(q.proc)), q.lay.commonArgs(q.proc, 4, promoteLimit)...)
			if err != nil {
				t.Fatal(err)
			}
		}
		c1, u1 := usec(t, own)
		fmt.Printf("PROBE dequeue(empty): %.2f us/call over %d calls\n", float64(u1-u0)/float64(c1-c0), c1-c0)
	}
}

func TestProbePrelude(t *testing.T) {
	if os.Getenv("PROBE") == "" {
		t.Skip()
	}
	own := redistest.Start(t)
	ctx := context.Background()
	q, err := Open(ctx, own.Client(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(ctx)
	for name, src := range map[string]string{"bare": "return 1", "prelude": prelude + "return 1", "prelude+take": prelude + takeFn + "return 1",
		"prelude+submit": prelude + submitFn + "return 1", "now": prelude + "return now()"} {
		s := redis.NewScript(src)
		c0, u0 := usec(t, own)
		for i := 0; i < 3000; i++ {
			if err := s.Run(ctx, q.rdb, q.lay.common(q.lay.inflight(q.proc)), q.lay.commonArgs(q.proc, 4, promoteLimit)...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c1, u1 := usec(t, own)
		fmt.Printf("PROBE %s: %.2f us/call over %d calls\n", name, float64(u1-u0)/float64(c1-c0), c1-c0)
	}
}
