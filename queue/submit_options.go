package queue

import "time"

// SubmitOption configures one Submit.
type SubmitOption func(*submitConfig) error

type submitConfig struct {
	id          string
	tenant      string
	batch       string // set by Batch.Submit
	policy      Policy
	batchOf     *Batch // set by Batch.Submit: it keeps the batch's shard
	delay       time.Duration
	dueAt       time.Time
	maxAttempts int
	timeout     time.Duration
	retention   time.Duration
	priority    int
	dedupKey    string
	dedupWindow time.Duration
}

func defaultSubmitConfig() submitConfig {
	return submitConfig{maxAttempts: DefaultMaxAttempts, timeout: DefaultTimeout, retention: DefaultRetention}
}

// WithTaskID sets the task's id (1 to MaxTaskIDSize bytes). Submit refuses
// an id the queue still knows with ErrDuplicateTask, which makes a retried
// Submit safe. Defaults to a random id. An id may not start as the ids
// of a sharded queue do, with a shard number and "~" ("2~..."): the
// queue would look for it in that shard only.
func WithTaskID(id string) SubmitOption {
	return func(c *submitConfig) error {
		if err := validID(id); err != nil {
			return err
		}
		if carriedShard(id, MaxShards) >= 0 {
			return invalid("task id %q starts as a shard's (a number and %q): choose another", id, shardSep)
		}
		c.id = id
		return nil
	}
}

// MaxTenantIDSize bounds a tenant id.
const MaxTenantIDSize = 256

// WithTenant submits the task for a tenant: it runs only while the
// tenant has fewer tasks in flight (and Acquire slots held) than its
// capacity, and tenants with waiting tasks take turns. The tenant must be
// registered (SetTenant), else Submit fails with ErrUnknownTenant and
// writes nothing. Defaults to none: the task is not capped.
func WithTenant(id string) SubmitOption {
	return func(c *submitConfig) error {
		if err := validTenant(id); err != nil {
			return err
		}
		c.tenant = id
		return nil
	}
}

func validTenant(id string) error {
	if id == "" || len(id) > MaxTenantIDSize {
		return invalid("tenant id must be 1 to %d bytes, got %d", MaxTenantIDSize, len(id))
	}
	return nil
}

// WithDelay makes the task available d after Submit, by Redis's clock.
// Defaults to 0: at once.
func WithDelay(d time.Duration) SubmitOption {
	return func(c *submitConfig) error {
		if d < 0 {
			return invalid("delay must not be negative, got %v", d)
		}
		c.delay, c.dueAt = d, time.Time{}
		return nil
	}
}

// WithDueAt makes the task available at t. t is turned into a delay with
// this process's clock at Submit; a t in the past means at once.
func WithDueAt(t time.Time) SubmitOption {
	return func(c *submitConfig) error {
		if t.IsZero() {
			return invalid("zero due time")
		}
		c.dueAt, c.delay = t, 0
		return nil
	}
}

// WithMaxAttempts sets how many attempts a task gets before it becomes a
// dead letter (a process that dies or stops answering during an attempt
// uses it up too). 1 to MaxAttempts. Defaults to 25.
func WithMaxAttempts(n int) SubmitOption {
	return func(c *submitConfig) error {
		if n < 1 || n > MaxAttempts {
			return invalid("max attempts must be 1 to %d, got %d", MaxAttempts, n)
		}
		c.maxAttempts = n
		return nil
	}
}

// WithTimeout bounds each attempt: the handler's ctx ends after d, and an
// attempt whose handler returns at or after that deadline has failed,
// even when it returns a result: the result is dropped, the worker's
// resource is reset, and the task is retried under its policy (a dead
// letter after its max attempts). Lateness is judged by when the handler
// returned (the process's monotonic clock), not by when its return is
// recorded: a handler that returns before the deadline is in time.
// Defaults to 1m.
func WithTimeout(d time.Duration) SubmitOption {
	return func(c *submitConfig) error {
		if d <= 0 {
			return invalid("timeout must be positive, got %v", d)
		}
		c.timeout = d
		return nil
	}
}

// WithRetention sets how long the task's outcome (result or final error)
// is kept once it is finished, for Result and for duplicate-id checks.
// Dead letters are kept until replayed, purged or dropped at the
// MaxDeadLetters bound. At least 1ms. Defaults to 24h.
func WithRetention(d time.Duration) SubmitOption {
	return func(c *submitConfig) error {
		if d < time.Millisecond {
			return invalid("retention must be at least 1ms, got %v", d)
		}
		c.retention = d
		return nil
	}
}

// MaxPriority is the highest priority (WithPriority).
const MaxPriority = 9

// WithPriority sets the task's priority, 0 (the default) to MaxPriority:
// of a tenant's tasks available now, a worker takes the highest priority
// first, and tasks of one priority in order. Priority orders a tenant's
// own tasks only: tenants still take turns (one task a turn while several
// have waiting tasks), so a tenant's urgent tasks never starve another
// tenant, and untenanted tasks take turns as one tenant. A retried task
// keeps its priority.
func WithPriority(p int) SubmitOption {
	return func(c *submitConfig) error {
		if p < 0 || p > MaxPriority {
			return invalid("priority must be 0 to %d, got %d", MaxPriority, p)
		}
		c.priority = p
		return nil
	}
}

// MaxDedupKeySize bounds a deduplication key (WithDedup).
const MaxDedupKeySize = 512

// WithDedup refuses duplicates of the task for window: while a task
// queued with key is remembered (window from its Submit, by Redis's
// clock, whatever becomes of the task), a Submit with the same key
// queues nothing and returns the first task's Future instead, with
// Future.Duplicate true and the first task's ID (its outcome comes from
// Redis when another process submitted it; see Future.Wait). The window
// is independent of the outcome's retention; a task that is withdrawn
// (its Submit failed) frees its key. The key is 1 to MaxDedupKeySize
// bytes, the window at least a millisecond. Compare WithTaskID, which
// refuses a known id with ErrDuplicateTask for as long as the task is
// kept.
func WithDedup(key string, window time.Duration) SubmitOption {
	return func(c *submitConfig) error {
		if key == "" || len(key) > MaxDedupKeySize {
			return invalid("deduplication key must be 1 to %d bytes, got %d", MaxDedupKeySize, len(key))
		}
		if window < time.Millisecond {
			return invalid("deduplication window must be at least 1ms, got %v", window)
		}
		c.dedupKey, c.dedupWindow = key, window
		return nil
	}
}
