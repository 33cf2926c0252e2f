package rmap

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Result is what a conditional or unconditional write found and did, so
// that a caller can act on the outcome without a second read.
type Result struct {
	// Applied reports whether the write changed the map. It is false when
	// a condition failed (SetIfNotExists found the key, SetIfExists did
	// not, TestAndSet or TestAndDelete found another value or none) or
	// there was nothing to delete.
	Applied bool
	// Prev is the value the key held when the script ran: the value
	// replaced or deleted, or the value that made a condition fail.
	Prev string
	// Existed reports whether the key existed when the script ran, so
	// that an empty Prev is unambiguous.
	Existed bool
	// Rev is the map's revision after the write (when Applied) or the
	// revision the condition was checked against. Revisions restart at 1
	// when the map is created again (after Destroy or a Redis data loss).
	Rev int64
}

// Every write below costs one script round trip to Redis, plus, when other
// processes wrote concurrently, the wait for their changes to reach this
// copy. When a write returns nil the local copy reflects it (read your
// writes); an error wrapping ErrUnsynced means the write was committed but
// ctx ended (or the Map closed) before the local copy caught up.

// Set sets key to value unconditionally. Result.Prev is the value it
// replaced.
func (m *Map) Set(ctx context.Context, key, value string) (Result, error) {
	if err := m.check(key, value); err != nil {
		return Result{}, m.opErr("set", key, err)
	}
	return m.result(ctx, "set", key, setScript, key, value)
}

// SetIfNotExists sets key to value only if key does not exist. When it
// does, Result.Applied is false and Result.Prev holds the value found.
func (m *Map) SetIfNotExists(ctx context.Context, key, value string) (Result, error) {
	if err := m.check(key, value); err != nil {
		return Result{}, m.opErr("set if not exists", key, err)
	}
	return m.result(ctx, "setnx", key, setNXScript, key, value)
}

// SetIfExists sets key to value only if key exists, whatever its value.
// When it does not, Result.Applied is false and nothing is written. Use it
// for refreshes (keep-alives) that must not bring back an entry that
// someone else deleted, for instance a worker declared dead.
func (m *Map) SetIfExists(ctx context.Context, key, value string) (Result, error) {
	if err := m.check(key, value); err != nil {
		return Result{}, m.opErr("set if exists", key, err)
	}
	return m.result(ctx, "setxx", key, setXXScript, key, value)
}

// TestAndSet sets key to value only if key exists and holds expected (a
// compare-and-swap). When it does not, Result.Applied is false and
// Result.Prev and Result.Existed tell what was found. To create a key
// conditionally, use SetIfNotExists.
func (m *Map) TestAndSet(ctx context.Context, key, expected, value string) (Result, error) {
	if err := m.check(key, value); err != nil {
		return Result{}, m.opErr("test and set", key, err)
	}
	return m.result(ctx, "testandset", key, testAndSetScript, key, expected, value)
}

// Delete deletes key. Result.Applied reports whether it existed;
// Result.Prev is the value deleted.
func (m *Map) Delete(ctx context.Context, key string) (Result, error) {
	if err := m.check(key); err != nil {
		return Result{}, m.opErr("delete", key, err)
	}
	return m.result(ctx, "delete", key, deleteScript, key)
}

// TestAndDelete deletes key only if it holds expected. When it does not,
// Result.Applied is false and Result.Prev and Result.Existed tell what was
// found.
func (m *Map) TestAndDelete(ctx context.Context, key, expected string) (Result, error) {
	if err := m.check(key); err != nil {
		return Result{}, m.opErr("test and delete", key, err)
	}
	return m.result(ctx, "testanddelete", key, testAndDeleteScript, key, expected)
}

// Inc adds delta to the decimal integer stored at key (a missing key
// counts as 0) and returns the new value. It returns an error wrapping
// ErrNotInteger, and writes nothing, when the value is not a 64-bit
// decimal integer or the sum would overflow.
func (m *Map) Inc(ctx context.Context, key string, delta int64) (int64, error) {
	if err := m.check(key); err != nil {
		return 0, m.opErr("inc", key, err)
	}
	r, err := m.write(ctx, "inc", key, incScript, key, strconv.FormatInt(delta, 10))
	if r.status != statusSet {
		return 0, err
	}
	n, perr := strconv.ParseInt(r.value, 10, 64)
	if perr != nil {
		return 0, m.opErr("inc", key, perr)
	}
	return n, err // err may be ErrUnsynced: n is still the committed value
}

// AppendValues appends values to the list stored at key, creating it if
// needed, and returns the list's length afterwards. Lists are stored in
// the encoding of EncodeValues; a key holding anything else yields
// ErrNotList. A list that would exceed the maximum value size yields
// ErrTooLarge. Nothing is written on error.
func (m *Map) AppendValues(ctx context.Context, key string, values ...string) (int, error) {
	if err := m.check(key, values...); err != nil {
		return 0, m.opErr("append values", key, err)
	}
	if len(values) == 0 {
		vals, err := m.GetValues(key)
		return len(vals), err
	}
	r, err := m.write(ctx, "append", key, appendScript, listArgs(key, values)...)
	return int(r.count), err
}

// AppendUniqueValues appends each of values that the list at key does not
// hold yet (once, even if repeated in values) and returns how many it
// added: 0 means every value was already there, and nothing was written.
// Errors as AppendValues.
func (m *Map) AppendUniqueValues(ctx context.Context, key string, values ...string) (int, error) {
	if err := m.check(key, values...); err != nil {
		return 0, m.opErr("append unique values", key, err)
	}
	if len(values) == 0 {
		return 0, nil
	}
	r, err := m.write(ctx, "appendunique", key, appendUniqueScript, listArgs(key, values)...)
	return int(r.count), err
}

// RemoveValues removes every occurrence of values from the list at key and
// returns how many elements it removed. A list left empty is deleted, so
// an empty list and a missing key are the same. Errors as AppendValues.
func (m *Map) RemoveValues(ctx context.Context, key string, values ...string) (int, error) {
	if err := m.check(key, values...); err != nil {
		return 0, m.opErr("remove values", key, err)
	}
	if len(values) == 0 {
		return 0, nil
	}
	r, err := m.write(ctx, "removevalues", key, removeValuesScript, listArgs(key, values)...)
	return int(r.count), err
}

// Reset deletes every entry of the map and returns how many there were.
// The map stays in use: its revision keeps counting.
func (m *Map) Reset(ctx context.Context) (int, error) {
	if m.isClosed() {
		return 0, fmt.Errorf("rmap: reset %q: %w", m.name, ErrClosed)
	}
	r, err := m.write(ctx, "reset", "", resetScript)
	return int(r.count), err
}

// Destroy deletes the map's keys from Redis, tells every replica (which
// become empty, as does m's copy), closes m and returns how many entries
// the map had. Other
// replicas stay open: a later write through any of them creates the map
// anew, at revision 1 of a new incarnation.
func (m *Map) Destroy(ctx context.Context) (int, error) {
	if m.isClosed() {
		return 0, fmt.Errorf("rmap: destroy %q: %w", m.name, ErrClosed)
	}
	res, err := script.Run(ctx, m.rdb, destroyScript, "rmap.destroy", m.keys)
	if err != nil {
		return 0, fmt.Errorf("rmap: destroy %q: %w", m.name, err)
	}
	n, err := toInt(res)
	if err != nil {
		return 0, fmt.Errorf("rmap: destroy %q: %w", m.name, err)
	}
	m.mu.Lock()
	m.applyLocked(&change{op: opDestroy})
	m.mu.Unlock()
	return int(n), m.Close()
}

func listArgs(key string, values []string) []any {
	args := make([]any, 0, len(values)+1)
	args = append(args, key)
	for _, v := range values {
		args = append(args, v)
	}
	return args
}

// check validates a key and values before anything reaches Redis.
func (m *Map) check(key string, values ...string) error {
	if key == "" {
		return ErrEmptyKey
	}
	if len(key) > m.cfg.maxValueSize {
		return fmt.Errorf("%w: key of %d bytes > %d", ErrTooLarge, len(key), m.cfg.maxValueSize)
	}
	for _, v := range values {
		if len(v) > m.cfg.maxValueSize {
			return fmt.Errorf("%w: value of %d bytes > %d", ErrTooLarge, len(v), m.cfg.maxValueSize)
		}
	}
	if m.isClosed() {
		return ErrClosed
	}
	return nil
}

func (m *Map) opErr(op, key string, err error) error {
	return fmt.Errorf("rmap: %s %q in %q: %w", op, key, m.name, err)
}

// result runs a write and converts its reply to a Result.
func (m *Map) result(ctx context.Context, op, key string, s scriptT, args ...any) (Result, error) {
	r, err := m.write(ctx, op, key, s, args...)
	return Result{
		Applied: r.status == statusSet || r.status == statusDeleted,
		Prev:    r.prev,
		Existed: r.existed,
		Rev:     r.rev,
	}, err
}

// write runs s and makes the local copy reflect the reply before it
// returns. On ErrUnsynced the reply is returned too: the write happened.
func (m *Map) write(ctx context.Context, op, key string, s scriptT, args ...any) (reply, error) {
	argv := make([]any, 0, len(args)+2)
	argv = append(argv, newEpoch(), m.cfg.maxValueSize)
	argv = append(argv, args...)
	res, err := script.Run(ctx, m.rdb, s, "rmap."+op, m.keys, argv...)
	if err != nil {
		return reply{}, m.opErr(op, key, err)
	}
	r, err := parseReply(res)
	if err != nil {
		return reply{}, m.opErr(op, key, err)
	}
	switch r.status {
	case statusNotInteger:
		return reply{}, m.opErr(op, key, fmt.Errorf("%w: %s", ErrNotInteger, r.prev))
	case statusNotList:
		return reply{}, m.opErr(op, key, ErrNotList)
	case statusTooLarge:
		return reply{}, m.opErr(op, key, fmt.Errorf("%w: list would exceed %d bytes", ErrTooLarge, m.cfg.maxValueSize))
	}
	if err := m.settle(ctx, r, key); err != nil {
		return r, m.opErr(op, key, err)
	}
	return r, nil
}

// settle applies a write's own change locally when it directly follows
// the local copy; otherwise it waits for the sync loop to get there.
func (m *Map) settle(ctx context.Context, r reply, key string) error {
	c := change{epoch: r.epoch, rev: r.rev, key: key, value: r.value}
	switch r.status {
	case statusSet:
		c.op = opSet
	case statusDeleted:
		c.op = opDelete
	case statusCleared:
		c.op = opClear
	}
	if c.op != 0 {
		m.mu.Lock()
		if !m.loading && !m.closed && m.nextLocked(&c) {
			m.applyLocked(&c)
			m.mu.Unlock()
			return nil
		}
		m.mu.Unlock()
	}
	if err := m.waitFor(ctx, r.epoch, r.rev); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsynced, err)
	}
	return nil
}

// newEpoch returns a random incarnation id, used by a script only when the
// map has none in Redis.
func newEpoch() string {
	return strconv.FormatUint(rand.Uint64()|1<<63, 16)
}
