package queue

import "fmt"

// Mode is how a Server ends: ModeServe waits for tasks until stopped;
// ModeDrain runs what it can take now, then stops by itself.
type Mode int32

const (
	// ModeServe takes tasks as they come, until Stop, Halt or Close.
	ModeServe Mode = iota
	// ModeDrain takes tasks while some are available to it; once a take
	// finds none it may run now and none of its tasks is in flight, the
	// server stops (as Stop) and Done closes. Tasks not due yet, waiting
	// for a retry, or held back by their tenant's capacity are left to
	// other servers.
	ModeDrain
)

func (m Mode) String() string {
	switch m {
	case ModeServe:
		return "serve"
	case ModeDrain:
		return "drain"
	}
	return fmt.Sprintf("Mode(%d)", int32(m))
}

// SetMode switches the server to m at once, in either direction, while
// it runs: a server switched to ModeDrain stops when nothing is left for
// it (at once if it is idle). The process publishes the new mode at once
// (Stats' ProcessInfo.Mode). It returns ErrStopped once the server is
// stopping or stopped. Client.Drain does the same from outside the
// process.
func (s *Server) SetMode(m Mode) error {
	if m != ModeServe && m != ModeDrain {
		return invalid("unknown mode %d", int32(m))
	}
	if s.isStopping() {
		return ErrStopped
	}
	if Mode(s.mode.Swap(int32(m))) != m {
		s.q.kickKeepAlive()
	}
	select {
	case s.modeSet <- struct{}{}:
	default:
	}
	return nil
}

// Mode returns the server's mode.
func (s *Server) Mode() Mode { return Mode(s.mode.Load()) }
