package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
)

// privateRedis is a redis-server the bench started, without persistence.
type privateRedis struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

// startRedis starts redis-server on a free loopback port, with extra
// arguments after the bench's own, and waits until it answers.
func startRedis(ctx context.Context, extra ...string) (*privateRedis, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shepherd-bench-")
	if err != nil {
		return nil, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--maxclients", "10000"}, extra...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &privateRedis{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}
	rdb := redis.NewClient(&redis.Options{Addr: s.addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := rdb.Ping(ctx).Err(); err == nil {
			return s, nil
		} else if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer: %w", s.addr, err)
		}
		select {
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond): // polling a process we just started
		}
	}
}

func (s *privateRedis) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.dir)
}

// rawClients and rawOps are redis-benchmark's -c 50 -n 200000.
const (
	rawClients = 50
	rawOps     = 200000
)

// measureRaw measures unpipelined XADD with 50 clients: with
// redis-benchmark when it is installed and the Redis is our own (it
// writes the key "s"), else with an equivalent Go loop.
func (b *bench) measureRaw(ctx context.Context) (float64, string, error) {
	n := b.scaled(rawOps, 1000)
	useTool := b.cfg.raw == "redis-benchmark" || (b.cfg.raw == "auto" && b.cfg.addr == "")
	if useTool {
		if _, err := exec.LookPath("redis-benchmark"); err == nil {
			rate, err := rawWithTool(ctx, b.addr, n)
			return rate, "redis-benchmark", err
		} else if b.cfg.raw == "redis-benchmark" {
			return 0, "", err
		}
	}
	rate, err := b.rawWithGo(ctx, n)
	return rate, "go loop", err
}

var rpsPattern = regexp.MustCompile(`([0-9.]+) requests per second`)

func rawWithTool(ctx context.Context, addr string, n int) (float64, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	out, err := exec.CommandContext(ctx, "redis-benchmark", "-h", host, "-p", port, "-P", "1",
		"-c", strconv.Itoa(rawClients), "-n", strconv.Itoa(n), "-q", "XADD", "s", "*", "f", "v").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %w: %s", err, out)
	}
	m := rpsPattern.FindAllSubmatch(out, -1)
	if len(m) == 0 {
		return 0, fmt.Errorf("redis-benchmark: no rate in %q", out)
	}
	rate, err := strconv.ParseFloat(string(m[len(m)-1][1]), 64)
	if err != nil {
		return 0, err
	}
	return rate, nil
}

// rawWithGo runs 50 goroutines that XADD one entry per round trip on a
// key of our own, which it deletes afterwards.
func (b *bench) rawWithGo(ctx context.Context, n int) (float64, error) {
	space, err := keys.New("shepherd-bench")
	if err != nil {
		return 0, err
	}
	key := space.Key(keys.KindStream, "raw-xadd")
	rdb := redis.NewClient(&redis.Options{Addr: b.addr, PoolSize: rawClients})
	defer rdb.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, rawClients)
	start := time.Now()
	for i := range rawClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"f", "v"}}).Err(); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if err := rdb.Del(ctx, key).Err(); err != nil {
		return 0, err
	}
	return float64(n) / elapsed.Seconds(), nil
}

// redisCPU is the CPU time the Redis rdb talks to has used
// (used_cpu_user + used_cpu_sys, from INFO cpu), in seconds.
func redisCPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, m := range cpuLine.FindAllStringSubmatch(info, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		total += v
	}
	return total, nil
}

var cpuLine = regexp.MustCompile(`(?m)^used_cpu_(?:user|sys):([0-9.]+)\r?$`)

// cpuMeter measures Redis's CPU per task over a part of a scenario: the
// figure that travels between machines (it bounds what one Redis core
// can do).
type cpuMeter struct {
	rdb   *redis.Client // on the Redis measured
	start float64
	err   error
}

// startCPU starts a meter on the bench's Redis.
func (b *bench) startCPU(ctx context.Context) *cpuMeter {
	return startCPUOn(ctx, b.rdb)
}

// startCPUOn starts a meter on the Redis rdb talks to (TW's primary).
func startCPUOn(ctx context.Context, rdb *redis.Client) *cpuMeter {
	m := &cpuMeter{rdb: rdb}
	m.start, m.err = redisCPU(ctx, rdb)
	return m
}

// perTask records redis_cpu_us_per_task in r: the CPU Redis used since
// startCPU divided by tasks. A failed INFO leaves it out.
func (m *cpuMeter) perTask(ctx context.Context, r result, tasks int) {
	m.per(ctx, r, "redis_cpu_us_per_task", tasks)
}

// per records field in r: the CPU Redis used since startCPU, in µs,
// divided by n.
func (m *cpuMeter) per(ctx context.Context, r result, field string, n int) {
	used, err := m.used(ctx)
	if err != nil || n <= 0 {
		return
	}
	r.set(field, used*1e6/float64(n))
}

// used returns the CPU Redis used since startCPU, in seconds.
func (m *cpuMeter) used(ctx context.Context) (float64, error) {
	if m.err != nil {
		return 0, m.err
	}
	end, err := redisCPU(ctx, m.rdb)
	if err != nil {
		return 0, err
	}
	return end - m.start, nil
}
