package rmap

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Operations a change carries (see scripts.go for the wire form).
const (
	opSet     = 'S'
	opDelete  = 'D'
	opClear   = 'C'
	opDestroy = 'X'
)

// change is one revision of a map: what a pub/sub message says, or what a
// write's reply says when the writer applies it itself.
type change struct {
	epoch string
	rev   int64
	op    byte
	key   string
	value string
}

var errBadMessage = errors.New("rmap: malformed change message")

// parseChange decodes "EPOCH REV BODY". It copies nothing: key and value
// are substrings of s.
func parseChange(s string) (change, error) {
	var c change
	sp := strings.IndexByte(s, ' ')
	if sp <= 0 {
		return c, errBadMessage
	}
	c.epoch, s = s[:sp], s[sp+1:]
	sp = strings.IndexByte(s, ' ')
	if sp <= 0 {
		return c, errBadMessage
	}
	rev, err := strconv.ParseInt(s[:sp], 10, 64)
	if err != nil || sp+1 >= len(s) {
		return c, errBadMessage
	}
	c.rev, s = rev, s[sp+1:]
	c.op, s = s[0], s[1:]
	switch c.op {
	case opClear, opDestroy:
		if s != "" {
			return c, errBadMessage
		}
		return c, nil
	case opSet, opDelete:
	default:
		return c, errBadMessage
	}
	sp = strings.IndexByte(s, ' ')
	if sp <= 0 {
		return c, errBadMessage
	}
	n, err := strconv.Atoi(s[:sp])
	if err != nil || n < 0 || n > len(s)-sp-1 {
		return c, errBadMessage
	}
	c.key, s = s[sp+1:sp+1+n], s[sp+1+n:]
	if c.op == opDelete && s != "" {
		return c, errBadMessage
	}
	c.value = s
	return c, nil
}

// reply is a write script's reply (see scripts.go).
type reply struct {
	epoch   string
	rev     int64
	status  int64
	prev    string
	existed bool
	value   string
	count   int64
}

func parseReply(res any) (reply, error) {
	var r reply
	a, ok := res.([]any)
	if !ok || len(a) < 6 {
		return r, fmt.Errorf("rmap: unexpected script reply %T", res)
	}
	var err error
	r.epoch, _ = a[0].(string)
	if r.rev, err = toInt(a[1]); err != nil {
		return r, err
	}
	if r.status, err = toInt(a[2]); err != nil {
		return r, err
	}
	r.prev, r.existed = a[3].(string)
	r.value, _ = a[4].(string)
	if r.count, err = toInt(a[5]); err != nil {
		return r, err
	}
	return r, nil
}

func toInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("rmap: bad integer in script reply: %w", err)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("rmap: unexpected %T in script reply", v)
	}
}

// EncodeValues returns the stored form of a list value, as AppendValues
// writes it: each value as its length in decimal bytes, ":", and its
// bytes, concatenated. The empty list encodes as "". Use it to compare or
// set a whole list with TestAndSet or Set.
func EncodeValues(values ...string) string {
	n := 0
	for _, v := range values {
		n += len(v) + 4
	}
	b := make([]byte, 0, n)
	for _, v := range values {
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return string(b)
}

// DecodeValues parses a list value written by AppendValues or
// EncodeValues. It returns an error wrapping ErrNotList for anything else.
func DecodeValues(s string) ([]string, error) {
	var out []string
	for len(s) > 0 {
		c := strings.IndexByte(s, ':')
		if c <= 0 {
			return nil, ErrNotList
		}
		n := 0
		for _, d := range s[:c] {
			if d < '0' || d > '9' || n > len(s) {
				return nil, ErrNotList
			}
			n = n*10 + int(d-'0')
		}
		if n > len(s)-c-1 {
			return nil, ErrNotList
		}
		out = append(out, s[c+1:c+1+n])
		s = s[c+1+n:]
	}
	return out, nil
}
