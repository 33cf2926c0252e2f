// Package streamfields names the fields of a stream entry as the streaming
// package writes and reads them, so that the Lua scripts of other
// packages (the pool's) can add entries a Sink or Reader understands:
//
//	XADD key * <Event> name <Topic> topic <Payload> payload
//
// Short names: every entry stores them.
package streamfields

const (
	Event   = "e" // the event's name
	Topic   = "t" // the entry's topic; absent when it has none
	Payload = "p" // the payload, possibly empty
)
