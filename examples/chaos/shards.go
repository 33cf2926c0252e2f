package chaos

import (
	"fmt"

	"github.com/shepherd-go/shepherd/pool"
)

// ShardOptions returns the node options of a pool of n shards, for the
// worker processes and the dispatcher alike: none for 1.
func ShardOptions(n int) ([]pool.NodeOption, error) {
	switch {
	case n < 1:
		return nil, fmt.Errorf("chaos: %d shards: want at least 1", n)
	case n == 1:
		return nil, nil
	}
	return []pool.NodeOption{pool.WithShards(n)}, nil
}
