package queue

// RedisAddr is the address of the test binary's private Redis, for the
// examples (package queue_test).
func RedisAddr() string { return srv.Addr() }

func (f *Future) isDone() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}
