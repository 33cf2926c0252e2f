package streaming

import (
	"strconv"

	"github.com/shepherd-go/shepherd/internal/keys"
)

// keyspace names every Redis key of one stream. It is the only place in
// this package that asks internal/keys for key names.
type keyspace struct {
	space keys.Space
	name  string // the stream's name, as the caller gave it
}

// stream returns the key of the stream itself.
func (k keyspace) stream() string { return k.space.Key(keys.KindStream, k.name) }

// lease returns the key of the reclaim lease of group on this stream.
func (k keyspace) lease(group string) string {
	return k.space.Key(keys.KindStreamLease, k.groupName(group))
}

// alive returns the key of the consumer keep-alive hash of group on this
// stream.
func (k keyspace) alive(group string) string {
	return k.space.Key(keys.KindStreamAlive, k.groupName(group))
}

// groupName names (stream, group) unambiguously: the stream name's length
// comes first, so stream "a:b" with group "c" and stream "a" with group
// "b:c" never share a key. Keying by group alone would let two streams'
// sinks fight over one lease.
func (k keyspace) groupName(group string) string {
	return strconv.Itoa(len(k.name)) + ":" + k.name + ":" + group
}
