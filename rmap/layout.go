package rmap

import (
	"fmt"

	"github.com/shepherd-go/shepherd/internal/keys"
)

// Layout names the Redis keys of a map, for the Lua scripts of other
// packages that read a map together with keys of their own in one atomic
// script (the pool checks in its scripts that a worker is registered, and
// that the slot table it decided on is still current). Such scripts may
// read these keys; they must not write them: a write that does not go
// through a Map bumps no revision and notifies no replica.
type Layout struct {
	// Hash is the map's content: a Redis hash of the map's keys and values.
	Hash string
	// Rev is a hash whose field RevField holds the map's revision, the
	// number Map.Rev and Map.Snapshot report; a script compares it with
	// the revision a decision was made on.
	Rev string
	// Channel is the pub/sub channel the map's changes are published on.
	Channel string
}

// RevField is the field of Layout.Rev that holds a map's revision.
const RevField = "rev"

// KeysOf returns the layout of the map name under hash tag tag, as Join
// uses it (with WithHashTag(tag); Join's default tag is name). It returns
// an error wrapping ErrInvalidOption for an empty name or a tag that
// cannot be a hash tag.
func KeysOf(tag, name string) (Layout, error) {
	if name == "" {
		return Layout{}, fmt.Errorf("%w: empty map name", ErrInvalidOption)
	}
	space, err := keys.New(tag)
	if err != nil {
		return Layout{}, fmt.Errorf("%w: keys of %q: %w", ErrInvalidOption, name, err)
	}
	return Layout{
		Hash:    space.Key(keys.KindMap, name),
		Rev:     space.Key(keys.KindMapRev, name),
		Channel: space.Key(keys.KindMapChannel, name),
	}, nil
}
