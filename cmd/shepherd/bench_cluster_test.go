package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TS reads a master's CPU and its scripts' time from INFO cpu and
// commandstats; other commands' time is not the scripts'.
func TestParseMasterStats(t *testing.T) {
	t.Parallel()
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.000000\r\n" +
		"# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=700,usec_per_call=70.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=1,usec=50,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_fcall:calls=2,usec=20,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_publish:calls=5,usec=9000,usec_per_call=1800.00,rejected_calls=0,failed_calls=0\r\n"
	s, err := parseMasterStats(info)
	require.NoError(t, err)
	assert.InDelta(t, 3.75, s.cpu, 1e-9)
	assert.InDelta(t, 770, s.scriptUsec, 1e-9)
	assert.InDelta(t, 13, s.calls, 1e-9)
	_, err = parseMasterStats("# Commandstats\r\n")
	assert.Error(t, err)
}
