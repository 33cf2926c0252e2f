// Package rediscluster runs a private Redis Cluster on loopback: one
// redis-server process per master, each on free ports in a temporary
// directory of its own, joined with `redis-cli --cluster create`, for the
// tests (through internal/redistest) and for the bench (cmd/shepherd),
// which must not link the testing package.
//
// Start returns once every node reports cluster_state:ok with all 16384
// slots served; Close kills every node and removes its directory. A node
// can be killed and restarted on its ports with its cluster configuration.
// Nothing here ever touches a Redis it did not start.
package rediscluster
