package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// Main is the body of a test binary's TestMain: it starts one Redis server
// shared by the package's tests, stores it in *srv, runs the tests, closes
// the server, then checks with goleak that no goroutine outlived the
// tests, and exits. It never returns. A little before go test's -timeout
// it dumps every goroutine and names the tests still running, last, then
// exits (a log cut to its tail still says which test hung).
//
//	var srv *redistest.Server
//
//	func TestMain(m *testing.M) { redistest.Main(m, &srv) }
func Main(m *testing.M, srv **Server, opts ...Option) {
	s, err := New(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*srv = s
	disarm := Watchdog(func() { _ = s.Close() })
	code := m.Run()
	disarm()
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "redistest: close shared server: %v\n", err)
		code = 1
	}
	if code == 0 {
		// After a failed dial (fault tests kill Redis on purpose) go-redis
		// probes the server from a goroutine that ends up to a second
		// after its client closed; it is not ours to wait for.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Name returns a name unique to this test run and tb, for pools, streams
// and maps on a shared server: the test's name, cleaned to letters, digits
// and dashes, plus a random suffix. Tests that use it can run in parallel.
func Name(tb testing.TB) string {
	var b strings.Builder
	for _, r := range tb.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[:40]
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return name + "-" + hex.EncodeToString(suffix[:])
}

// Keys lists the keys of rdb that match pattern, with SCAN, sorted: for
// tests that check what a call left behind. On a *redis.ClusterClient it
// scans every master (a SCAN through the cluster client would see one
// node's keys only).
func Keys(tb testing.TB, rdb redis.UniversalClient, pattern string) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			out = append(out, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, rdb)
	}
	if err != nil {
		tb.Fatalf("redistest: scan %q: %v", pattern, err)
	}
	sort.Strings(out)
	return out
}
