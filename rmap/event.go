package rmap

import "sync"

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventSet reports that Key now holds Value.
	EventSet EventKind = iota + 1
	// EventDelete reports that Key was deleted; Value is the value it
	// held.
	EventDelete
	// EventResync reports that the subscriber fell behind by more than
	// the subscriber buffer and the events in between were dropped: re-read
	// the map (Map, Keys) to learn its current state.
	EventResync
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case EventSet:
		return "set"
	case EventDelete:
		return "delete"
	case EventResync:
		return "resync"
	default:
		return "unknown"
	}
}

// Event is a change of the local copy, delivered by Subscribe.
type Event struct {
	Kind  EventKind
	Key   string
	Value string
	// Rev is the map's revision after the change.
	Rev int64
}

// subscription delivers events to one subscriber in order. Its queue is
// bounded: on overflow the backlog is replaced by one EventResync, so a
// slow reader never blocks the Map or grows memory without bound.
type subscription struct {
	out  chan Event
	wake chan struct{} // capacity 1: there is something in queue
	stop chan struct{} // closed by cancel
	done chan struct{} // closed when the delivery goroutine has exited

	mu    sync.Mutex
	queue []Event
	limit int

	once sync.Once
}

func newSubscription(limit int) *subscription {
	s := &subscription{
		out:   make(chan Event),
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		limit: limit,
	}
	go s.deliver()
	return s
}

// push queues e without blocking.
func (s *subscription) push(e Event) {
	s.mu.Lock()
	if len(s.queue) >= s.limit {
		clear(s.queue)
		s.queue = append(s.queue[:0], Event{Kind: EventResync, Rev: e.Rev})
	}
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) deliver() {
	defer close(s.done)
	defer close(s.out)
	var batch []Event
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		s.mu.Unlock()
		for i, e := range batch {
			select {
			case s.out <- e:
				batch[i] = Event{}
			case <-s.stop:
				return
			}
		}
	}
}

// cancel stops delivery, waits for the delivery goroutine and closes the
// channel. It is idempotent.
func (s *subscription) cancel() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}
