// Package rediscluster runs a private Redis Cluster on loopback: one
// redis-server process per node, each on free ports in a temporary
// directory of its own, joined with `redis-cli --cluster create`, for the
// tests (through internal/redistest) and for the bench (cmd/shepherd),
// which must not link the testing package. The nodes are masters only,
// or masters with replicas (WithReplicas).
//
// Start returns once every node reports cluster_state:ok with all 16384
// slots served and every replica is in sync; Close kills every node and
// removes its directory. A node can be killed and restarted on its ports
// with its cluster configuration; a killed master's replica takes over
// its slots, and WaitFailover waits for that. Which node is a master is
// read from the cluster (MasterNodes, ReplicasOf, NodeOf), never assumed.
// Nothing here ever touches a Redis it did not start.
package rediscluster
