package pool

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// readPayloads returns the payloads of the jobs ks, nil for a job that is
// gone: from their entries in the jobs hash, or from the payloads hash
// for entries written before the payload moved into the record (wire.go).
// One round trip.
func readPayloads(ctx context.Context, rdb redis.UniversalClient, lay layout, ks []string) ([][]byte, error) {
	var recs, old *redis.SliceCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		recs = p.HMGet(ctx, lay.jobs, ks...)
		old = p.HMGet(ctx, lay.payloads, ks...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(ks))
	for i, v := range recs.Val() {
		raw, ok := v.(string)
		if !ok {
			continue
		}
		if _, p, ok := splitRecord(raw); ok {
			out[i] = []byte(p)
		} else if p, ok := old.Val()[i].(string); ok {
			out[i] = []byte(p)
		}
	}
	return out, nil
}
