package member

import (
	"fmt"
)

// A Setting is one unit-wide setting a joining member brings: its name as
// stored, the member's value, and whether the member set it explicitly
// (an option given) rather than by default.
//
// Unit-wide settings (a pool's WorkerTTL, a queue's TTL and bounds) act
// on the whole unit, so they are stored with it and every member uses
// the stored values. The settle_settings Lua helper applies one rule for every
// owner:
//
//   - a value the member did not set adopts the stored one, whether other
//     members are live or not;
//   - an explicit value that differs from the stored one is refused while
//     another member is live (nothing is written: the owner reports a
//     *Mismatch), and replaces the stored one when none is (the unit is
//     new or dormant);
//   - a setting with no stored value is stored;
//   - a member that only adopts (a client that judges nobody: adopt_only)
//     writes nothing and is never refused.
//
// The owner decides, in the same script, who counts as live (its
// keep-alives, by Redis's clock) and registers the member after settling.
type Setting struct {
	Name     string
	Value    string
	Explicit bool
}

// SettleArgs appends settings to a script's ARGV in the triples settle
// reads (name, value, "1" or "0").
func SettleArgs(args []any, settings ...Setting) []any {
	for _, s := range settings {
		explicit := "0"
		if s.Explicit {
			explicit = "1"
		}
		args = append(args, s.Name, s.Value, explicit)
	}
	return args
}

// Mismatch is settle's refusal: the member set Name explicitly to Mine,
// but the unit uses Stored and another member is live.
type Mismatch struct {
	Name, Stored, Mine string
}

// Settled reads settle's reply (from its first element on): the values
// the member must use by name, or the refusal.
func Settled(reply []any) (map[string]string, *Mismatch, error) {
	if len(reply) == 0 {
		return nil, nil, fmt.Errorf("member: settle: empty reply")
	}
	if reply[0] == "MISMATCH" {
		if len(reply) != 4 {
			return nil, nil, fmt.Errorf("member: settle: malformed reply %v", reply)
		}
		return nil, &Mismatch{Name: fmt.Sprint(reply[1]), Stored: fmt.Sprint(reply[2]), Mine: fmt.Sprint(reply[3])}, nil
	}
	if reply[0] != "OK" || len(reply)%2 != 1 {
		return nil, nil, fmt.Errorf("member: settle: malformed reply %v", reply)
	}
	use := make(map[string]string, len(reply)/2)
	for i := 1; i+1 < len(reply); i += 2 {
		use[fmt.Sprint(reply[i])] = fmt.Sprint(reply[i+1])
	}
	return use, nil, nil
}
