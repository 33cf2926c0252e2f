package queue

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// An unfinished task with a payload of at most recordMaxPayload bytes is
// a record in one of its shard's tasks hashes (layout.tasksOf): its
// fields (wire.go) but the payload as one msgpack map, then the payload,
// written by the scripts (prelude_records.go, rec and recSave). A finished task
// (an outcome, a dead letter), an unfinished one with a larger payload
// and one an earlier version queued are a hash of their own instead
// (layout.task). A taskRead reads a task either way; a record that does
// not decode reads as no task.

// A taskRead is a read of some fields of one task, queued in a pipeline:
// its record and its hash, whichever it has.
type taskRead struct {
	rec    *redis.StringCmd
	hash   *redis.SliceCmd
	fields []string
}

// readTask queues in pipe the read of fields of task id in shard l.
func readTask(ctx context.Context, pipe redis.Pipeliner, l layout, id string, fields ...string) *taskRead {
	return &taskRead{rec: pipe.HGet(ctx, l.tasksOf(id), id), hash: pipe.HMGet(ctx, l.task(id), fields...), fields: fields}
}

// Val is what an HMGET of the fields gives on the task's hash: a string
// per field, nil for an absent one; all nil when there is no such task
// (or the pipeline failed).
func (r *taskRead) Val() []any {
	if s, err := r.rec.Result(); err == nil {
		v := make([]any, len(r.fields))
		m, err := decodeRecord(s)
		if err != nil {
			return v
		}
		for i, f := range r.fields {
			if x, ok := m[f]; ok {
				v[i] = x
			}
		}
		return v
	}
	return r.hash.Val()
}

// readTaskNow reads fields of task id in shard l (readTask, in a pipeline
// of its own).
func readTaskNow(ctx context.Context, rdb redis.UniversalClient, l layout, id string, fields ...string) ([]any, error) {
	pipe := rdb.Pipeline()
	r := readTask(ctx, pipe, l, id, fields...)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	return r.Val(), nil
}

// decodeRecord decodes a task's record: a msgpack map of strings (the
// scripts write strings only; numbers are read too, as decimal text),
// its fields but the payload, then the payload's bytes.
func decodeRecord(s string) (map[string]string, error) {
	d := msgDecoder{b: s}
	n, err := d.mapLen()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, n)
	for range n {
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		v, err := d.str()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	m[fieldPayload] = d.b[d.i:]
	return m, nil
}

var errRecord = errors.New("queue: a task record is not a msgpack map of strings and a payload")

// msgDecoder reads the msgpack the scripts' cmsgpack writes for a
// record.
type msgDecoder struct {
	b string
	i int
}

func (d *msgDecoder) take(n int) (string, error) {
	if n < 0 || d.i+n > len(d.b) {
		return "", errRecord
	}
	s := d.b[d.i : d.i+n]
	d.i += n
	return s, nil
}

func (d *msgDecoder) uint(n int) (uint64, error) {
	s, err := d.take(n)
	if err != nil {
		return 0, err
	}
	var x uint64
	for i := range n {
		x = x<<8 | uint64(s[i])
	}
	return x, nil
}

func (d *msgDecoder) mapLen() (int, error) {
	c, err := d.uint(1)
	switch {
	case err != nil:
		return 0, err
	case c&0xf0 == 0x80:
		return int(c & 0x0f), nil
	case c == 0xde:
		n, err := d.uint(2)
		return int(n), err
	case c == 0xdf:
		n, err := d.uint(4)
		return int(n), err
	}
	return 0, errRecord
}

// str reads a string, or a number as its decimal text.
func (d *msgDecoder) str() (string, error) {
	c, err := d.uint(1)
	if err != nil {
		return "", err
	}
	var n uint64
	switch {
	case c&0xe0 == 0xa0:
		n = c & 0x1f
	case c == 0xd9 || c == 0xc4:
		n, err = d.uint(1)
	case c == 0xda || c == 0xc5:
		n, err = d.uint(2)
	case c == 0xdb || c == 0xc6:
		n, err = d.uint(4)
	case c <= 0x7f:
		return strconv.FormatUint(c, 10), nil
	case c >= 0xe0:
		return strconv.FormatInt(int64(int8(c)), 10), nil
	case c >= 0xcc && c <= 0xcf:
		x, err := d.uint(1 << (c - 0xcc))
		return strconv.FormatUint(x, 10), err
	case c >= 0xd0 && c <= 0xd3:
		size := 1 << (c - 0xd0)
		x, err := d.uint(size)
		// Sign-extend from size bytes.
		shift := 64 - 8*size
		return strconv.FormatInt(int64(x<<shift)>>shift, 10), err
	case c == 0xca:
		x, err := d.uint(4)
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(x))), 'f', -1, 32), err
	case c == 0xcb:
		s, err := d.take(8)
		if err != nil {
			return "", err
		}
		return strconv.FormatFloat(math.Float64frombits(binary.BigEndian.Uint64([]byte(s))), 'f', -1, 64), nil
	default:
		return "", fmt.Errorf("%w (byte %#x)", errRecord, c)
	}
	if err != nil {
		return "", err
	}
	return d.take(int(n))
}
