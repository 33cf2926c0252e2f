package dashboard

import (
	"context"
	"errors"
	"net/http"

	"github.com/shepherd-go/shepherd/queue"
)

// runSchedule is the queue page's "run now" of a schedule: it enqueues the
// schedule's task at once (queue.Client.RunSchedule), after a
// confirmation.
func (s *Handler) runSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("schedule")
	if name == "" {
		s.fail(w, r, http.StatusBadRequest, "no schedule given")
		return
	}
	s.queueAction(w, r, "run schedule", "Run schedule "+quote(name)+" now, outside its ticks? Its task is enqueued at once.", "schedule-run",
		func(ctx context.Context, c *queue.Client) error {
			_, err := c.RunSchedule(ctx, name)
			if errors.Is(err, queue.ErrScheduleNotFound) {
				return errNotFound{"schedule " + quote(name) + " not found"}
			}
			return err
		})
}

func init() {
	flashes["schedule-run"] = "The schedule's task was enqueued."
}
