package pool

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A record is stored compact, fields separated by spaces:
//
//	STATE GEN NONCE WORKER CREATED STARTS [k=v ...] [e=ERROR]
//
// STATE is the state's letter (stateCodes), CREATED ms of Redis's clock
// in hex, the times t and st in hex relative to CREATED (a leading "-"
// when negative), the other optional fields (rd, rq, sr, sq, tc) as they
// are, and the error text last, as a JSON string (it may hold spaces).
// A running job's record is about 57 bytes instead of about 105 in JSON,
// which puts it with a 64-byte payload in a 128-byte allocation. The
// scripts write only running jobs' records compact (what a pool holds at
// rest; reading and writing the compact form costs Lua more than cjson,
// so the records a dispatch passes through on its way stay JSON), and
// JSON for a record the form cannot hold (a space in an id).
var stateCodes = map[string]string{
	stateQueued: "q", stateRouted: "r", stateClaimed: "c", stateRunning: "u", stateStopping: "x",
}

// pendingCode is the state letter of a running job its admission handed
// to its worker (record.Pending): "p GEN NONCE WORKER CREATED STARTS",
// Started being CREATED.
const pendingCode = "p"

// parseCompact decodes a compact record.
func parseCompact(rec string, r *record) error {
	bad := func(why string) error { return fmt.Errorf("pool: malformed record %q: %s", rec, why) }
	if i := strings.Index(rec, " e="); i >= 0 {
		if err := json.Unmarshal([]byte(rec[i+3:]), &r.LastErr); err != nil {
			return bad("error text")
		}
		rec = rec[:i]
	}
	f := strings.Split(rec, " ")
	if len(f) < 6 {
		return bad("too few fields")
	}
	for state, code := range stateCodes {
		if f[0] == code {
			r.State = state
		}
	}
	if f[0] == pendingCode {
		// Handed to its worker by its admission: running, as far as the
		// pool can tell, since then.
		r.State, r.Pending, r.Started = stateRunning, true, -1
	}
	if r.State == "" {
		return bad("state")
	}
	var err error
	if r.Gen, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return bad("generation")
	}
	r.Nonce, r.Worker = f[2], f[3]
	if r.Created, err = strconv.ParseInt(f[4], 16, 64); err != nil {
		return bad("created")
	}
	if r.Starts, err = strconv.Atoi(f[5]); err != nil {
		return bad("starts")
	}
	for _, kv := range f[6:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "t", "st":
			d, err := strconv.ParseInt(v, 16, 64)
			if err != nil {
				return bad(k)
			}
			if k == "t" {
				r.Changed = r.Created + d
			} else {
				r.Started = r.Created + d
			}
		case "rd":
			r.DispNode = v
		case "rq":
			r.DispReq = v
		case "sr":
			r.StopNode = v
		case "sq":
			r.StopReq = v
		case "tc":
			r.Trace = v
		}
	}
	if r.Started == -1 {
		r.Started = r.Created
	}
	return nil
}
