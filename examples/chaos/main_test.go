package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	chaosDuration = flag.Duration("chaos.duration", 0,
		"how long each scenario's fault phase runs; 0 runs the short CI version (a few seconds each)")
	chaosOutage = flag.Duration("chaos.outage", 2*time.Second,
		"how long Redis stays unavailable in TestChaosRedisUnavailable (the issue's figure is 10s)")
	chaosChurners = flag.Int("chaos.churners", 4, "concurrent dispatch loops in TestChaosSteadyChurn")
	chaosMaxLive  = flag.Int("chaos.maxlive", 750, "running jobs TestChaosSteadyChurn keeps at most (0: no cap)")
	chaosPauseTTL = flag.Duration("chaos.pausettl", 2*time.Second,
		"WorkerTTL of TestChaosPausedProcess (the pool's default is 10s); PendingJobTTL stays at its default")
	chaosVerbose    = flag.Bool("chaos.v", false, "worker processes log the pool's warnings to the test's stderr")
	chaosClusterTTL = flag.Duration("chaos.clusterttl", 5*time.Second,
		"WorkerTTL of the pool's cluster scenarios")
	chaosDump = flag.String("chaos.dump", "", "a directory where a failed pool scenario writes its log (JSON)")
)

// workerBin and queueBin are the chaosworker and chaosqueue programs,
// built once by TestMain.
var workerBin, queueBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "chaosworker-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = filepath.Join(dir, "chaosworker")
	queueBin = filepath.Join(dir, "chaosqueue")
	code := 1
	if err := build(workerBin, queueBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	if code == 0 {
		// After a failed dial (the tests kill Redis) go-redis probes the
		// server from a goroutine that ends up to a second after its
		// client closed; it is not ours to wait for.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// build compiles the worker programs without -race: the code under test
// also runs in the test process (the dispatcher, the submitter), which has
// -race. Their paths are relative to this package's directory, where go
// test runs it.
func build(worker, queue string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	for out, pkg := range map[string]string{worker: "chaosworker", queue: "chaosqueue"} {
		cmd := exec.Command(goBin, "build", "-o", out, "./cmd/"+pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("chaos: building %s: %v\n%s", pkg, err, b)
		}
	}
	return nil
}

// faultPhase is how long a scenario injects faults: short in CI, the
// -chaos.duration flag for a soak.
func faultPhase(short time.Duration) time.Duration {
	if *chaosDuration > 0 {
		return *chaosDuration
	}
	return short
}
