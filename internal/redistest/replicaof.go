package redistest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// StartReplicaOf starts a private Redis server that replicates primary
// (--replicaof, syncing at once: diskless, no delay), for tb, and waits
// until primary counts it among its synced replicas. opts apply to the
// replica.
func StartReplicaOf(tb testing.TB, primary *Server, opts ...Option) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(primary.Addr())
	if err != nil {
		tb.Fatal(err)
	}
	opts = append([]Option{WithArgs("--replicaof", host, port,
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")}, opts...)
	r := Start(tb, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := primary.WaitReplicas(ctx, 1); err != nil {
		tb.Fatal(err)
	}
	return r
}

// WaitReplicas waits until n replicas acknowledged everything s wrote so
// far (a write of its own, then WAIT), or ctx ends.
func (s *Server) WaitReplicas(ctx context.Context, n int) error {
	c := s.Client()
	for {
		if err := c.Set(ctx, "redistest:synced", "1", time.Minute).Err(); err == nil {
			got, err := c.Do(ctx, "wait", n, 100).Int64()
			if err == nil && int(got) >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: %s: fewer than %d replicas synced: %w", s.Addr(), n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
