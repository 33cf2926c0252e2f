// Package keys builds every Redis key and pub/sub channel name that
// shepherd uses, in one place.
//
// Every name has the form
//
//	shepherd:{TAG}:KIND:NAME
//
// TAG is the caller's hash tag (a pool's name, for instance): Redis Cluster
// hashes only the text between the first "{" and the following "}", so all
// names of one tag share a slot, and multi-key scripts over them are legal.
// KIND is one of the constants below and contains no ":"; NAME is whatever
// the caller chose and comes last, so two different (KIND, NAME) pairs never
// produce the same string.
package keys

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kinds of names. Each package uses only its own.
const (
	KindStream      = "stream"      // a Redis stream (streaming)
	KindStreamLease = "streamlease" // a sink's reclaim lease (streaming)
	KindStreamAlive = "streamalive" // a sink's consumer keep-alives (streaming)
	KindMap         = "map"         // a replicated map's hash (rmap)
	KindMapRev      = "maprev"      // a replicated map's revision counter (rmap)
	KindMapChannel  = "mapchan"     // a replicated map's pub/sub channel (rmap)
	KindPool        = "pool"        // a pool's own hashes and leases (pool)
	KindQueue       = "queue"       // a queue's tasks, lists and leases (queue)
	KindChaosLog    = "chaoslog"    // the chaos suite's event log (examples/chaos)
	KindGuard       = "guard"       // the slot guard, never written (Guard)
)

// ErrInvalidTag is returned for a tag that cannot be a hash tag.
var ErrInvalidTag = errors.New("keys: invalid hash tag")

// Space names keys under one hash tag. The zero Space is invalid; use New.
type Space struct {
	prefix string // "shepherd:{TAG}:"
}

// New returns the Space of tag. The tag must be non-empty and must not
// contain "}", which would end the hash tag early.
func New(tag string) (Space, error) {
	if tag == "" {
		return Space{}, fmt.Errorf("%w: empty", ErrInvalidTag)
	}
	if strings.Contains(tag, "}") {
		return Space{}, fmt.Errorf("%w: %q contains '}'", ErrInvalidTag, tag)
	}
	return Space{prefix: prefixStart + tag + "}:"}, nil
}

// Valid reports whether s was made by New.
func (s Space) Valid() bool { return s.prefix != "" }

// Key returns the name of kind for name. kind must be one of the Kind
// constants; it panics on a kind containing ":", which would make names
// ambiguous (a programmer error).
func (s Space) Key(kind, name string) string {
	if !s.Valid() {
		panic("keys: zero Space; use keys.New")
	}
	if kind == "" || strings.Contains(kind, ":") {
		panic("keys: invalid kind " + kind)
	}
	return s.prefix + kind + ":" + name
}

// Guard returns the slot guard of the tag of key, a name made by Key: a
// key that nothing ever writes, which every script declares beside its
// own keys (internal/script). While Redis Cluster moves a slot from one
// master to another, it refuses a script that declares a key it does not
// hold (TRYAGAIN, or ASK and then TRYAGAIN): so no script runs on either
// master with part of the slot's keys moved, which would make the keys it
// names in its body but does not declare (a queue's task keys) look
// missing, or stop it with an error midway, its first writes kept. ok is
// false for a key not made by Key.
func Guard(key string) (guard string, ok bool) {
	rest, found := strings.CutPrefix(key, prefixStart)
	if !found {
		return "", false
	}
	end := strings.IndexByte(rest, '}')
	if end <= 0 {
		return "", false
	}
	return prefixStart + rest[:end] + "}:" + KindGuard + ":slot", true
}

// Slot returns the Redis Cluster hash slot of key (0 to 16383), as
// CLUSTER KEYSLOT computes it: the CRC16 (XMODEM) of the key's hash tag,
// the text between its first "{" and the next "}" when that is not
// empty, else of the whole key, modulo 16384.
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// prefixStart is what every name begins with, before its tag.
const prefixStart = "shepherd:{"

// Pattern returns a SCAN/KEYS pattern that matches every name in s, with
// glob characters in the tag escaped. Tests and cleanup use it.
func (s Space) Pattern() string { return Glob(s.prefix) + "*" }

// KindPattern returns a SCAN/KEYS pattern that matches every name of kind
// in s (Key(kind, anything)).
func (s Space) KindPattern(kind string) string { return Glob(s.Key(kind, "")) + "*" }

// Glob escapes the glob characters of s (*, ?, [, ], \\) for a SCAN/KEYS
// pattern that matches s literally.
func Glob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ShardTag is the hash tag of shard i of the unit (a pool or a queue)
// called name: name itself for shard 0, name#i for the others. A unit's
// name may not contain '#', so the tags of two units never collide.
func ShardTag(name string, i int) string {
	if i == 0 {
		return name
	}
	return name + "#" + strconv.Itoa(i)
}
