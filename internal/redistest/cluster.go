package redistest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/rediscluster"
)

// Cluster is a private Redis Cluster owned by a test: masters only, or
// with rediscluster.WithReplicas masters and their replicas, each node a
// redis-server process of its own on free loopback ports. Client gives a
// *redis.ClusterClient, Node a client of one node; Kill and Restart take a
// node away and bring it back, and WaitFailover waits for a replica to
// take a killed master's place. See package rediscluster.
type Cluster struct {
	*rediscluster.Cluster
}

// ClusterOption configures a Cluster: rediscluster.WithReplicas, WithAOF,
// WithArgs, WithNodeTimeout, WithBinaries.
type ClusterOption = rediscluster.Option

// clusterStartTimeout bounds starting the nodes and joining them.
const clusterStartTimeout = 60 * time.Second

// StartCluster starts a private Redis Cluster of masters masters (at
// least 3), and their replicas if opts has rediscluster.WithReplicas, for
// tb, with no persistence unless asked, and removes it (processes killed,
// directories deleted) when tb's test ends. It returns once every node
// reports cluster_state:ok with all 16384 slots served and every replica
// is in sync, about two seconds. It fails tb (never skips) when redis-server or redis-cli is
// missing, with a message that says what to install.
//
// The nodes run redis-server and redis-cli from PATH, or the
// REDISTEST_SERVER and REDISTEST_CLI environment variables.
func StartCluster(tb testing.TB, masters int, opts ...ClusterOption) *Cluster {
	tb.Helper()
	c, err := NewCluster(masters, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("redistest: close cluster: %v", err)
		}
	})
	return c
}

// NewCluster is StartCluster without a test: the caller must Close the
// cluster.
func NewCluster(masters int, opts ...ClusterOption) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterStartTimeout)
	defer cancel()
	opts = append([]ClusterOption{rediscluster.WithBinaries(os.Getenv("REDISTEST_SERVER"), os.Getenv("REDISTEST_CLI"))}, opts...)
	c, err := rediscluster.Start(ctx, masters, opts...)
	if err != nil {
		return nil, err
	}
	return &Cluster{c}, nil
}
