package member

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/script"
)

// Lease is a lease on a Redis key that one holder keeps at a time: the
// pool's janitor, a consumer group's reclaimer. A holder renews it more
// often than its TTL; a holder that stops renewing (dead, frozen, cut
// off) loses it once the TTL passes on Redis's clock, and another takes
// it. The lease alone does not fence work: a holder frozen past the TTL
// may still act once before it learns, so the work it guards must be
// safe to do twice, or check lease_held (Lua) in the script that does it.
// A Lease is safe for concurrent use.
type Lease struct {
	rdb    redis.UniversalClient
	key    string
	holder string
}

// NewLease returns the lease at key as holder sees it; nothing is written
// until Hold.
func NewLease(rdb redis.UniversalClient, key, holder string) *Lease {
	return &Lease{rdb: rdb, key: key, holder: holder}
}

// Holder returns the holder name this Lease takes the lease as.
func (l *Lease) Holder() string { return l.holder }

// Hold takes the lease, or renews it if this holder has it, for ttl, and
// reports whether this holder holds it now.
func (l *Lease) Hold(ctx context.Context, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return false, errors.New("member: lease TTL below 1ms")
	}
	res, err := script.Run(ctx, l.rdb, holdScript, "member: hold lease", []string{l.key}, l.holder, ttl.Milliseconds())
	return err == nil && res == int64(1), err
}

// Release gives the lease up if this holder has it, so that another
// holder takes it at once instead of after the TTL.
func (l *Lease) Release(ctx context.Context) error {
	_, err := script.Run(ctx, l.rdb, dropScript, "member: release lease", []string{l.key}, l.holder)
	return err
}

// holdScript takes or renews a lease.
//
//	KEYS[1] the lease; ARGV[1] holder, ARGV[2] TTL in ms
//
// Returns 1 if the holder holds the lease after the call, else 0.
var holdScript = redis.NewScript(Lua + `
return lease_hold(KEYS[1], ARGV[1], ARGV[2]) and 1 or 0
`)

// dropScript releases a lease if the holder has it.
//
//	KEYS[1] the lease; ARGV[1] holder
//
// Returns 0.
var dropScript = redis.NewScript(Lua + `
lease_drop(KEYS[1], ARGV[1])
return 0
`)
