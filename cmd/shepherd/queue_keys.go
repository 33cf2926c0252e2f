package main

import (
	"github.com/shepherd-go/shepherd/internal/keys"
)

// queueKeyPatterns are the SCAN patterns of every key of the queue called
// name: those of its home shard ("shepherd:{NAME}:*") and of its other
// shards ("shepherd:{NAME#i}:*", queue.WithShards). A queue's name holds
// no "#", so the second matches no other queue's keys; glob characters in
// the name are escaped.
func queueKeyPatterns(name string) []string {
	esc := keys.Glob(name)
	return []string{"shepherd:{" + esc + "}:*", "shepherd:{" + esc + "#*}:*"}
}
