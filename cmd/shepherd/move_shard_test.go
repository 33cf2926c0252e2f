package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// movedShard is what queue and pool move-shard print with -json.
type movedShard struct {
	Queue, Pool, From, To string
	Shard, Slot, Keys     int
}

// checkMoved checks move-shard's -json output out: in the JSON style,
// and as want says but for the keys moved, which it returns.
func checkMoved(t *testing.T, out string, want movedShard) int {
	t.Helper()
	checkJSONStyle(t, "move-shard", out)
	var got movedShard
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	want.Keys = got.Keys
	assert.Equal(t, want, got, out)
	return got.Keys
}

// refusal is a move-shard command line that fails: with its exit code,
// and an error that says what is wrong.
type refusal struct {
	args []string
	code int
	says string
}

// checkRefused runs cmd (queue or pool move-shard and its flags) with
// each refusal's arguments.
func checkRefused(t *testing.T, cmd []string, refusals []refusal) {
	t.Helper()
	for _, bad := range refusals {
		code, _, errOut := runCmd(append(append([]string(nil), cmd...), bad.args...)...)
		assert.Equal(t, bad.code, code, "%v: %s", bad.args, errOut)
		assert.Contains(t, errOut, bad.says, "%v", bad.args)
	}
}
