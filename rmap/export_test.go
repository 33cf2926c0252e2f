package rmap

import "github.com/redis/go-redis/v9"

// NewTestClient returns a client of the package's test server, for the
// examples in package rmap_test. The test server closes it.
func NewTestClient() *redis.Client { return srv.NewClient() }
