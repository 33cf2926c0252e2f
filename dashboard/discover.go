package dashboard

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Names lists the pools and the queues a Redis holds, sorted, by their
// keys: a pool is a tag with a key of kind "pool" (its settings, nodes,
// keep-alives or jobs), a queue a tag with a queue settings key (a
// shard "NAME#i" of either counts as NAME: their names hold no "#"). It
// SCANs
// the whole keyspace (every master of a Cluster), so it costs O(keys in
// Redis): for a dashboard's overview, or the CLI's list of the names
// that exist when one is not found, not for a hot path. It needs a
// *redis.Client or a *redis.ClusterClient.
func Names(ctx context.Context, rdb redis.UniversalClient) (pools, queues []string, err error) {
	var mu sync.Mutex
	seenPools, seenQueues := map[string]bool{}, map[string]bool{}
	scan := func(ctx context.Context, c *redis.Client) error {
		for _, p := range []struct {
			match string
			into  map[string]bool
		}{
			{"shepherd:{*}:pool:*", seenPools},
			{"shepherd:{*}:queue:settings", seenQueues},
		} {
			iter := c.Scan(ctx, 0, p.match, 1000).Iterator()
			for iter.Next(ctx) {
				if tag, ok := tagOf(iter.Val()); ok {
					tag, _, _ = strings.Cut(tag, "#")
					mu.Lock()
					p.into[tag] = true
					mu.Unlock()
				}
			}
			if err := iter.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("listing needs a *redis.Client or a *redis.ClusterClient, not %T", rdb)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dashboard: listing pools and queues: %w", err)
	}
	return sorted(seenPools), sorted(seenQueues), nil
}

// tagOf returns the hash tag of a shepherd key: the text between
// "shepherd:{" and the first "}" (a tag holds no "}").
func tagOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "shepherd:{")
	if !ok {
		return "", false
	}
	tag, _, ok := strings.Cut(rest, "}")
	return tag, ok && tag != ""
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
