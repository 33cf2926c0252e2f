package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// Recovery is one walk of the janitor through the job records (it may
// span passes) that followed a worker's death or recovered jobs, as
// Stats.Recoveries lists it.
type Recovery struct {
	// Time is Redis's clock when the walk ended and recorded it.
	Time time.Time `json:"time"`
	// Workers are the workers the janitor declared dead (their
	// keep-alive lapsed) since the walk before, if any.
	Workers []string `json:"workers,omitempty"`
	// Jobs counts the jobs the walk handed to another worker or queued
	// again: those of dead workers, and those whose Start did not return
	// within PendingJobTTL.
	Jobs int `json:"jobs"`
}

// maxRecoveries is how many recoveries the pool keeps (layout.recovery).
const maxRecoveries = 20

// recoveryEntry is a Recovery as stored in the recoveries list.
type recoveryEntry struct {
	Time    int64    `json:"t"` // ms, Redis TIME
	Workers []string `json:"w,omitempty"`
	Jobs    int      `json:"j"`
}

// recordRecovery adds a janitor walk to the pool's recoveries: dead are
// the workers declared dead since the walk before, jobs how many jobs it
// recovered. It only
// logs a failure: the recoveries are for operators.
func (n *Node) recordRecovery(ctx context.Context, dead []string, jobs int64) {
	args := make([]any, 0, 1+len(dead))
	args = append(args, jobs)
	for _, id := range dead {
		args = append(args, id)
	}
	if _, err := n.run(ctx, recordRecoveryScript, "record recovery",
		[]string{n.lay.settings, n.lay.shutdown, n.lay.recovery}, args...); err != nil {
		n.logger.Warn("recording a recovery", slog.Any("error", err))
	}
}

// recordRecoveryScript pushes a recovery onto the recoveries list and
// keeps the newest maxRecoveries. It writes nothing while the pool shuts
// down or once its settings are gone (Shutdown deleted the pool), so that
// a late janitor pass brings no key of a deleted pool back.
//
//	KEYS[1] settings, KEYS[2] shutdown map, KEYS[3] recoveries
//	ARGV[1] jobs recovered, ARGV[2..] the workers declared dead
//
// Returns 1 if recorded, else 0.
var recordRecoveryScript = redis.NewScript(member.Lua + fmt.Sprintf(`
if redis.call("EXISTS", KEYS[1]) == 0 or redis.call("HEXISTS", KEYS[2], %q) == 1 then return 0 end
local e = {t = now_ms(), j = tonumber(ARGV[1])}
if #ARGV > 1 then e.w = {unpack(ARGV, 2)} end
redis.call("LPUSH", KEYS[3], cjson.encode(e))
redis.call("LTRIM", KEYS[3], 0, %d)
return 1
`, shutdownFlag, maxRecoveries-1))

// parseRecoveries decodes the recoveries list, newest first as stored.
func parseRecoveries(raw []string) ([]Recovery, error) {
	out := make([]Recovery, 0, len(raw))
	for _, s := range raw {
		var e recoveryEntry
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			return nil, fmt.Errorf("recovery %q: %w", s, err)
		}
		out = append(out, Recovery{Time: time.UnixMilli(e.Time), Workers: e.Workers, Jobs: e.Jobs})
	}
	return out, nil
}
