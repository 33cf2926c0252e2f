package dashboard

import (
	"context"
	"fmt"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
)

// unschedule removes a pool's schedule for every node (pool.Unschedule),
// after a confirmation; it joins nothing.
func (s *Handler) unschedule(w http.ResponseWriter, r *http.Request) {
	s.removeFromPool(w, r, "unschedule", "Remove schedule %s of pool %s? No node plans it any more; the jobs it started keep running.",
		"unscheduled", pool.Unschedule)
}

// stopTicker stops a pool's cluster ticker for every node
// (pool.StopTicker), after a confirmation.
func (s *Handler) stopTicker(w http.ResponseWriter, r *http.Request) {
	s.removeFromPool(w, r, "stop ticker", "Stop ticker %s of pool %s for every node?", "ticker-stopped", pool.StopTicker)
}

func (s *Handler) removeFromPool(w http.ResponseWriter, r *http.Request, what, question, done string,
	remove func(context.Context, redis.UniversalClient, string, string) error) {
	poolName, name := r.PathValue("pool"), r.PostFormValue("name")
	if name == "" {
		s.fail(w, r, http.StatusBadRequest, what+": no name given")
		return
	}
	if !s.confirmed(w, r, fmt.Sprintf(question, quote(name), quote(poolName))) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.actionTimeout)
	defer cancel()
	err := remove(ctx, s.rdb, poolName, name)
	if s.actionFailed(w, r, what, err) {
		return
	}
	s.logger.Info("dashboard: "+what, "pool", poolName, "name", name)
	http.Redirect(w, r, s.links.pool(poolName)+"?done="+done, http.StatusSeeOther)
}
