package pool

// ACLCommands are the Redis commands a pool's nodes use, as ACL rules. A
// Redis user confined to one pool needs them, and the pool's keys and
// channels, and nothing else:
//
//	ACL SETUSER shepherd on >PASSWORD resetkeys resetchannels
//	  ~shepherd:{POOL}:* &shepherd:{POOL}:* -@all <ACLCommands>
//
// A pool of several shards (WithShards) adds the keys and channels of its
// other shards: ~shepherd:{POOL#*}:* &shepherd:{POOL#*}:*.
//
// +info lets each node detect a failover, +wait is for WithReplicas, and
// Shutdown scans the keyspace for the pool's keys (+scan), which returns
// the names of other keys too. Without +client|id and
// +client|unblock a pool still works: its blocking reads are capped at
// 100ms (more round trips while idle) and it logs one warning. A client
// that selects a database other than 0 needs +select, and go-redis on
// Redis 7.2 or newer sends CLIENT SETINFO (+client|setinfo) when it
// connects.
const ACLCommands = "+ping +hello +auth +time +client|id +client|unblock +evalsha +eval +multi +exec " +
	"+xadd +xdel +xtrim +xlen +xread +xreadgroup +xrevrange +xack +xgroup|create +xgroup|delconsumer " +
	"+xautoclaim +xclaim +xpending +xinfo|consumers " +
	"+hset +hsetnx +hget +hmget +hgetall +hdel +hkeys +hlen +hexists +hscan +hincrby +lpush +ltrim +lrange +lindex " +
	"+zadd +zscore +zremrangebyscore +sadd +srem +smembers " +
	"+get +set +del +exists +pexpire +unlink +scan +publish +subscribe +unsubscribe +info +wait"
