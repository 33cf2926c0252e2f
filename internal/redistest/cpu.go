package redistest

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// CPU returns the Redis CPU time used so far through rdb's server, user
// and system, in seconds (INFO cpu): benchmarks divide its growth by the
// work done, the figure that travels between machines.
func CPU(ctx context.Context, rdb redis.UniversalClient) (float64, error) {
	f, err := infoFields(ctx, rdb, "", "cpu")
	if err != nil {
		return 0, err
	}
	user, err1 := strconv.ParseFloat(f["used_cpu_user"], 64)
	sys, err2 := strconv.ParseFloat(f["used_cpu_sys"], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("INFO cpu: no used_cpu_user and used_cpu_sys in %v", f)
	}
	return user + sys, nil
}
