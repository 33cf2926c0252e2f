package jsonstyle

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"ID": "id", "InFlight": "in_flight", "WorkerTTL": "worker_ttl", "PID": "pid",
		"P50": "p50", "LeaseFor": "lease_for", "DeadDropped": "dead_dropped", "HTTPServer": "http_server", "MaxAttempts": "max_attempts",
		"HandlerP50": "handler_p50", "DeadLetters": "dead_letters"} {
		assert.Equal(t, want, SnakeCase(in), in)
	}
}

// rate has what the style knows a rate limit by, as queue.Rate does
// (internal/ cannot import queue; cmd/shepherd's and the dashboard's
// tests check queue.Rate itself).
type rate struct {
	N     int
	Per   time.Duration
	Burst int
}

func (r rate) IsZero() bool { return r == rate{} }

func (r rate) EffectiveBurst() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, r.N/50)
}

// notRate has the methods but not the fields of a rate limit.
type notRate struct{ N string }

func (notRate) IsZero() bool        { return false }
func (notRate) EffectiveBurst() int { return 7 }

func TestEncode(t *testing.T) {
	at := time.Date(2026, 11, 25, 18, 34, 45, 123e6, time.FixedZone("CET", 3600))
	type Inner struct{ LeaseFor time.Duration }
	v := struct {
		Inner
		InFlight   int64
		Tagged     time.Duration `json:"worker_ttl_ns"`
		Hidden     string        `json:"-"`
		Empty      time.Time     `json:"empty,omitempty"`
		At, Unset  time.Time
		Rate, None rate
		Other      notRate
		Payload    []byte
		List       []string
		Ptr        *int
		unexported int
	}{Inner: Inner{2280*time.Microsecond + 417}, InFlight: 3, Tagged: 10 * time.Second, Hidden: "x", At: at,
		Rate: rate{N: 500, Per: time.Second}, Other: notRate{"n"}, Payload: []byte("hi")}
	var b bytes.Buffer
	require.NoError(t, Encode(&b, v))
	assert.Equal(t, `{"lease_for_ms":2.28,"in_flight":3,"worker_ttl_ms":10000,"at":"2026-11-25T17:34:45.123Z","unset":null,`+
		`"rate":{"n":500,"per_ms":1000,"burst":10},"none":null,"other":{"n":"n"},"payload":"aGk=","list":[],"ptr":null}`+"\n", b.String())
}

func TestViolations(t *testing.T) {
	t.Parallel()
	_, bad, err := Violations([]byte(`{"ok_ms": 1, "at": "2026-11-25T17:00:00Z", "list": [{"BadKey": 1, "took_ns": 2, "when": "2026-11-25T18:00:00+01:00"}]}`))
	require.NoError(t, err)
	assert.Len(t, bad, 3, "%q", bad)
	_, _, err = Violations([]byte(`{`))
	assert.Error(t, err)
}

func TestAt(t *testing.T) {
	t.Parallel()
	var v any
	require.NoError(t, json.Unmarshal([]byte(`{"a": [{"b": 1}, {"b": 2}]}`), &v))
	assert.EqualValues(t, 2, At(v, "a.1.b"))
	assert.Nil(t, At(v, "a.2.b"))
	assert.Nil(t, At(v, "a.x"))
	assert.Nil(t, At(v, "c"))
}
