package streaming

import (
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/streamfields"
)

// Field names of an entry in Redis (streamfields: the pool's scripts add
// entries too).
const (
	fieldEvent   = streamfields.Event
	fieldTopic   = streamfields.Topic
	fieldPayload = streamfields.Payload
)

// Event is one stream entry as delivered by a Sink or a Reader. Receivers
// may keep and read it from any goroutine; nothing else modifies it.
type Event struct {
	// ID is the entry's stream ID, "<milliseconds>-<sequence>".
	ID string
	// Stream is the name of the stream (as given to NewStream, not the
	// Redis key).
	Stream string
	// Event is the event name given to Add.
	Event string
	// Topic is the entry's topic, or "" when it has none.
	Topic string
	// Payload is the entry's payload, possibly empty.
	Payload []byte
	// Reclaimed reports that a Sink delivers this entry again because it
	// stayed unacknowledged for longer than the ack grace period.
	Reclaimed bool
}

// Time returns when Redis added the entry, from the milliseconds part of
// its ID (Redis server time). It returns the zero Time for a malformed ID.
func (e *Event) Time() time.Time {
	ms, _, ok := parseID(e.ID)
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms))
}

// Entry returns the event's name, topic and payload as an Entry, to
// forward it to another stream with AddBatch.
func (e *Event) Entry() Entry {
	return Entry{Event: e.Event, Topic: e.Topic, Payload: e.Payload}
}

// parseID splits a stream ID "ms-seq" (or "ms") into its parts.
func parseID(id string) (ms, seq uint64, ok bool) {
	msPart, seqPart, hasSeq := strings.Cut(id, "-")
	ms, err := strconv.ParseUint(msPart, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if hasSeq {
		if seq, err = strconv.ParseUint(seqPart, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return ms, seq, true
}

// eventFromMessage converts an entry read with XREAD or XREADGROUP.
func eventFromMessage(stream string, m redis.XMessage) *Event {
	ev := &Event{ID: m.ID, Stream: stream}
	for k, v := range m.Values {
		s, _ := v.(string)
		switch k {
		case fieldEvent:
			ev.Event = s
		case fieldTopic:
			ev.Topic = s
		case fieldPayload:
			ev.Payload = []byte(s)
		}
	}
	return ev
}

// eventFromFields converts an entry returned by a Lua script: its ID and
// a flat list of field names and values.
func eventFromFields(stream, id string, fields []any) *Event {
	ev := &Event{ID: id, Stream: stream}
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		switch k {
		case fieldEvent:
			ev.Event = v
		case fieldTopic:
			ev.Topic = v
		case fieldPayload:
			ev.Payload = []byte(v)
		}
	}
	return ev
}
