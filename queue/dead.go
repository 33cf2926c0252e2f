package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// DeleteDead deletes the dead letter id: its record, payload and errors
// are gone, as PurgeDead does for all of them. It returns ErrTaskNotFound
// when id is not a dead letter (a task still unfinished is never deleted
// by it; see Cancel).
func (q *Client) DeleteDead(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	res, err := script.Run(ctx, q.rdb, deleteDeadScript, "queue: delete dead letter", q.lay.common(q.lay.task(id)), q.lay.commonArgs(id)...)
	if err != nil {
		return err
	}
	if res == "NOTDEAD" {
		return fmt.Errorf("%w: %q is not a dead letter", ErrTaskNotFound, id)
	}
	return nil
}

// deleteDeadScript deletes one dead letter.
//
//	KEYS[17] task key
//	ARGV[4] id
//
// Returns "OK" or "NOTDEAD".
var deleteDeadScript = redis.NewScript(prelude + `
if redis.call('ZREM', K_DEAD, ARGV[4]) == 0 then return 'NOTDEAD' end
redis.call('DEL', KEYS[17])
return 'OK'
`)
