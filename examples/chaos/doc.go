// Package chaos proves the pool's promises under faults, with real
// processes and a real Redis.
//
// The suite (chaos_test.go) builds the worker program in
// examples/chaos/cmd/chaosworker once, starts several of its processes
// against a private redis-server (each a full node with several workers),
// dispatches and stops jobs from the test process, and injects faults:
// SIGKILL and SIGSTOP of worker processes, kill and restart of Redis,
// Redis frozen, slow, failing and panicking handlers, rolling restarts.
//
// Every Start and Stop, every acknowledged DispatchJob and StopJob and
// every fault is appended to one Redis list, the Log, stamped with Redis
// TIME by the script that appends it. Check replays the log and verifies
// the invariants: no acknowledged job lost, no duplicate at rest, bounded
// recovery and double-running windows.
//
// The short version (a few seconds per scenario, all in parallel) runs in
// go test. A soak runs every fault phase longer (flags after the package):
//
//	go test ./examples/chaos -run Chaos -v -timeout 2h -chaos.duration=10m
//
// The queue's scenario (queue_test.go) does the same for a queue: three
// chaosqueue processes serve it while one is killed, one is paused for
// longer than every timeout and Redis is killed and restarted with AOF,
// under steady Submits from the test process; the check proves that every
// acknowledged task completed with an outcome from a logged attempt, that
// a failed Submit's task ran only when Redis died after receiving it, and
// reports how long the faulted processes' tasks took to start elsewhere.
//
// The pool's cluster scenarios (pool_cluster_test.go) run the worker
// processes against a Redis Cluster of 3 masters, without replicas (AOF
// on every node) and with one replica each, the log on a standalone Redis
// beside it: under steady churn, a worker process is killed, another
// frozen for longer than WorkerTTL, the master of the pool's slot killed
// and restarted (with replicas: failed over, and back as a replica), and
// the pool's slot moved to another master. The check adds that no key ran
// on two live workers at once (a frozen process's stale copies excepted)
// away from Redis's faults, nor for longer than a keep-alive period and a
// second after one (an outage may get a live worker declared dead).
//
// Other flags: -chaos.outage (how long Redis stays frozen, default 2s; the
// issue's figure is 10s), -chaos.churners and -chaos.maxlive (dispatch
// load and running-job cap of the churn scenario), -chaos.v (the worker
// processes' pool warnings on stderr), -chaos.dump (a directory where a
// failed pool scenario writes its log), -chaos.clusterttl (the cluster
// scenarios' WorkerTTL, 5 s). Each scenario logs its figures
// (go test -v): jobs dispatched, kills, recovery p50/p99/max per kill,
// double-running windows, jobs moved more than once.
package chaos
