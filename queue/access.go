package queue

// ACLCommands are the Redis commands a queue's processes use (their
// scripts' commands included), as ACL rules. A Redis user confined to one
// queue needs them, and the queue's keys and channels, and nothing else:
//
//	ACL SETUSER shepherd on >PASSWORD resetkeys resetchannels
//	  ~shepherd:{QUEUE}:* &shepherd:{QUEUE}:* -@all <ACLCommands>
//
// A queue of several shards (WithShards) has the keys and channels of its
// other shards too: add ~shepherd:{QUEUE#*}:* &shepherd:{QUEUE#*}:*.
//
// On a Redis Cluster it needs ClusterACLCommands as well.
//
// +info lets each process watch the master's replication id (failover
// detection, replicas.go), +wait is for WithReplicas.
//
// A client that selects a database other than 0 needs +select, and
// go-redis on Redis 7.2 or newer sends CLIENT SETINFO when it connects
// (+client|setinfo).
const ACLCommands = "+ping +hello +auth +time +evalsha +eval +subscribe +unsubscribe +publish +info +wait " +
	"+get +set +incr +incrby +decr +exists +del +pexpire +pttl +persist " +
	"+hset +hget +hmget +hgetall +hkeys +hdel +hlen +hexists " +
	"+lpush +rpush +lpop +rpop +lrem +llen +ltrim +lrange +sadd +srem +smembers +hincrby " +
	"+zadd +zrem +zscore +zcard +zrange +zrangebyscore +zrevrange +zpopmin +zremrangebyscore"

// ClusterACLCommands are the commands a queue's processes use on a Redis
// Cluster beyond ACLCommands: go-redis reads the cluster's slots and
// its commands' flags (COMMAND, until it gets them, before every call),
// and the queue's messages go by sharded pub/sub there (Redis 7.0 or
// newer).
const ClusterACLCommands = "+cluster|slots +command +ssubscribe +sunsubscribe +spublish"
