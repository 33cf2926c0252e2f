package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process runs redis-server as a child process.
type process struct {
	path string
	cfg  config
	dir  string
	port int

	tls *tlsFiles // nil without WithTLS

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

func newProcess(path string, cfg config) (*process, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: data dir: %w", err)
	}
	p := &process{path: path, cfg: cfg, dir: dir}
	if cfg.tls {
		if p.tls, err = makeTLS(dir); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: TLS certificates: %w", err)
		}
	}
	return p, nil
}

func (p *process) args() []string {
	port := []string{"--port", strconv.Itoa(p.port)}
	if p.tls != nil {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(p.port),
			"--tls-cert-file", p.tls.cert, "--tls-key-file", p.tls.key, "--tls-ca-cert-file", p.tls.ca,
			"--tls-auth-clients", "no"}
	}
	args := append(port,
		"--bind", "127.0.0.1",
		"--dir", p.dir,
		"--logfile", filepath.Join(p.dir, "redis.log"),
		"--daemonize", "no",
		"--save", "",
	)
	if p.cfg.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if p.cfg.password != "" {
		args = append(args, "--requirepass", p.cfg.password)
	}
	return append(args, p.cfg.args...)
}

func (p *process) start(ctx context.Context) (string, error) {
	// The first start picks a free port; a restart keeps it. Another
	// process can grab a free port between our probe and redis-server's
	// bind, so a first start retries on a new port.
	attempts := 1
	if p.port == 0 {
		attempts = 5
	}
	var err error
	for i := 0; i < attempts; i++ {
		if attempts > 1 {
			if p.port, err = freePort(); err != nil {
				return "", err
			}
		}
		if err = p.startOnce(ctx); err == nil {
			return p.addr(), nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return "", err
}

func (p *process) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// launch starts p's binary with args in p's directory, and closes
// p.exited when it exits.
func (p *process) launch(args ...string) error {
	cmd := exec.Command(p.path, args...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", p.path, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

// pid is the process id of p's latest launch.
func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) startOnce(ctx context.Context) error {
	if err := p.launch(p.args()...); err != nil {
		return err
	}
	exited := p.exited
	var tlsConfig *tls.Config
	if p.tls != nil {
		tlsConfig = p.tls.client
	}
	if err := waitReady(ctx, p.addr(), p.cfg.password, tlsConfig, exited, p.pid()); err != nil {
		_ = p.kill()
		return fmt.Errorf("redistest: %w; log: %s", err, p.logTail())
	}
	return nil
}

func (p *process) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

func (p *process) signal(sig syscall.Signal) error {
	if p.cmd == nil || p.cmd.Process == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redistest: signal %v: %w", sig, err)
	}
	return nil
}

func (p *process) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return p.wait(10 * time.Second)
}

func (p *process) stop() error {
	// A frozen server would never see SIGTERM.
	if err := p.signal(syscall.SIGCONT); err != nil {
		return err
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := p.wait(10 * time.Second); err != nil {
		return p.kill()
	}
	return nil
}

func (p *process) wait(d time.Duration) error {
	if p.exited == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(d):
		return fmt.Errorf("redistest: redis-server (pid %d) still running after %v", p.cmd.Process.Pid, d)
	}
}

func (p *process) freeze() error { return p.signal(syscall.SIGSTOP) }
func (p *process) thaw() error   { return p.signal(syscall.SIGCONT) }

func (p *process) destroy() error {
	err := p.kill()
	return errors.Join(err, os.RemoveAll(p.dir))
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
