package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// containerImage is the Redis used when no redis-server binary exists.
const containerImage = "redis:7"

// container runs Redis in Docker through testcontainers-go. It is the
// fallback for machines without a redis-server binary.
type container struct {
	cfg config
	ctr *tcredis.RedisContainer
}

func newContainer(cfg config) *container { return &container{cfg: cfg} }

func (c *container) args() []string {
	args := []string{"redis-server", "--save", "", "--enable-debug-command", "yes"}
	if c.cfg.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if c.cfg.password != "" {
		args = append(args, "--requirepass", c.cfg.password)
	}
	return append(args, c.cfg.args...)
}

func (c *container) start(ctx context.Context) (addr string, err error) {
	if c.cfg.tls {
		return "", errors.New("redistest: WithTLS needs a redis-server binary (no container fallback)")
	}
	if c.ctr == nil {
		c.ctr, err = runContainer(ctx, c.args())
		if err != nil {
			return "", err
		}
	} else if err := c.ctr.Start(ctx); err != nil {
		return "", fmt.Errorf("redistest: restart container: %w", err)
	}
	// Docker may map the port anew on every start.
	host, err := c.ctr.Host(ctx)
	if err != nil {
		return "", fmt.Errorf("redistest: container host: %w", err)
	}
	port, err := c.ctr.MappedPort(ctx, "6379/tcp")
	if err != nil {
		return "", fmt.Errorf("redistest: container port: %w", err)
	}
	addr = net.JoinHostPort(host, port.Port())
	if err := waitReady(ctx, addr, c.cfg.password, nil, nil, 0); err != nil {
		return "", fmt.Errorf("redistest: %w", err)
	}
	return addr, nil
}

// runContainer starts the container. testcontainers-go panics when it
// finds no Docker host (MustExtractDockerHost): the panic becomes an
// error, so that a machine without Docker gets the message saying what
// to install rather than a crash.
func runContainer(ctx context.Context, args []string) (ctr *tcredis.RedisContainer, err error) {
	defer func() {
		if p := recover(); p != nil {
			ctr, err = nil, fmt.Errorf("testcontainers: %v", p)
		}
	}()
	ctr, err = tcredis.Run(ctx, containerImage, testcontainers.WithCmd(args...))
	if err != nil {
		// A container that failed to start may exist: destroy removes it.
		return ctr, fmt.Errorf("testcontainers: %w", err)
	}
	return ctr, nil
}

func (c *container) kill() error {
	zero := time.Duration(0)
	return c.ctr.Stop(context.Background(), &zero)
}

func (c *container) stop() error {
	grace := 10 * time.Second
	return c.ctr.Stop(context.Background(), &grace)
}

// freeze and thaw cannot send SIGSTOP to Redis: it runs as the container's
// init process, which ignores it. DEBUG SLEEP blocks the server instead.
var errNoFreeze = errors.New("redistest: Freeze/Thaw need a redis-server process; in a container use Pause, which runs DEBUG SLEEP")

func (c *container) freeze() error { return errNoFreeze }
func (c *container) thaw() error   { return errNoFreeze }

func (c *container) destroy() error {
	if c.ctr == nil {
		return nil
	}
	return c.ctr.Terminate(context.Background())
}
