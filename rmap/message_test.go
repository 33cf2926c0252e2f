package rmap

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encodeChange builds a message the way the scripts' commit() does.
func encodeChange(c change) string {
	head := fmt.Sprintf("%s %d %c", c.epoch, c.rev, c.op)
	switch c.op {
	case opSet:
		return head + fmt.Sprintf("%d %s%s", len(c.key), c.key, c.value)
	case opDelete:
		return head + fmt.Sprintf("%d %s", len(c.key), c.key)
	default:
		return head
	}
}

func TestParseChange(t *testing.T) {
	t.Parallel()
	for _, c := range []change{
		{epoch: "e1", rev: 1, op: opSet, key: "k", value: "v"},
		{epoch: "e1", rev: 2, op: opSet, key: "a b 3:x", value: ""},
		{epoch: "e1", rev: 3, op: opSet, key: " ", value: " S1 x"},
		{epoch: "e1", rev: 4, op: opDelete, key: "k k"},
		{epoch: "e1", rev: 5, op: opClear},
		{epoch: "-", rev: 6, op: opDestroy},
	} {
		got, err := parseChange(encodeChange(c))
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	for _, bad := range []string{"", "e", "e 1", "e 1 ", "e x S1 k", "e 1 Q", "e 1 S5 k", "e 1 D1 kv", "e 1 Cx", " 1 C", "e 1 S-1 k"} {
		_, err := parseChange(bad)
		assert.ErrorIs(t, err, errBadMessage, "%q", bad)
	}
}

func FuzzParseChange(f *testing.F) {
	f.Add("e", int64(1), byte(opSet), "k", "v")
	f.Add("e", int64(7), byte(opDelete), "3:x y", "")
	f.Add("e", int64(9), byte(opClear), "", "")
	f.Fuzz(func(t *testing.T, epoch string, rev int64, op byte, key, value string) {
		// Arbitrary bytes never panic.
		_, _ = parseChange(epoch + key + value)
		if epoch == "" || rev < 0 || key == "" {
			return
		}
		for _, r := range epoch {
			if r == ' ' {
				return
			}
		}
		c := change{epoch: epoch, rev: rev, op: op, key: key, value: value}
		switch op {
		case opSet:
		case opDelete:
			c.value = ""
		case opClear, opDestroy:
			c.key, c.value = "", ""
		default:
			return
		}
		got, err := parseChange(encodeChange(c))
		require.NoError(t, err)
		require.Equal(t, c, got)
	})
}
