package pool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
)

// Delete removes a pool whose nodes are gone: refused while one is live,
// then every key, with how many (shepherd pool delete does the same).
func ExampleDelete() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-delete")
	if err != nil {
		panic(err)
	}
	_, err = pool.Delete(ctx, rdb, "example-delete")
	fmt.Println("while a node is live:", errors.Is(err, pool.ErrInUse))

	if err := node.Close(ctx); err != nil {
		panic(err)
	}
	n, err := pool.Delete(ctx, rdb, "example-delete")
	if err != nil {
		panic(err)
	}
	exists, _ := pool.Exists(ctx, rdb, "example-delete")
	fmt.Println("removed keys:", n > 0, "- still there:", exists)
	// Output:
	// while a node is live: true
	// removed keys: true - still there: false
}
