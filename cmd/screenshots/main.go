// Command screenshots refreshes the dashboard's screenshots in docs/: it
// starts a private redis-server, fills a pool and a queue with demo data
// (named nodes and processes, tenants, delayed, retrying, dead and done
// tasks, a minute of history), serves the dashboard on a loopback port and
// captures each page with headless Chromium at 1400 px.
//
//	go run ./cmd/screenshots -out docs/
//
// It needs redis-server and chromium (or SHEPHERD_CHROMIUM) on the
// machine, and takes about a minute: the pool's janitor samples its
// history every 10 s. It is not part of go test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/shepherd-go/shepherd/dashboard"
	"github.com/shepherd-go/shepherd/internal/redistest"
)

func main() {
	out := flag.String("out", "docs", "the directory the PNGs are written to")
	warm := flag.Duration("history", 40*time.Second, "how long the demo runs before the pages are captured (history for the charts)")
	flag.Parse()
	if err := run(*out, *warm); err != nil {
		log.Fatal(err)
	}
}

// shots are the pages captured: file name, path, and whether the whole
// page is captured (else the first 1000 px).
type shot struct {
	file, path string
	full       bool
}

func run(out string, warm time.Duration) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	srv, err := redistest.New()
	if err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), warm+3*time.Minute)
	defer cancel()
	rdb := srv.Client()

	stopDemo, err := demo(ctx, rdb)
	if err != nil {
		return err
	}
	defer stopDemo()
	log.Printf("demo data written; running %v for the charts' history", warm)
	select {
	case <-time.After(warm):
	case <-ctx.Done():
		return ctx.Err()
	}

	dash, err := dashboard.New(rdb, dashboard.WithRefreshEvery(time.Hour))
	if err != nil {
		return err
	}
	defer dash.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: dash, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	base := "http://" + ln.Addr().String()

	shots := []shot{
		{"dashboard-overview.png", "/", false},
		{"dashboard-pool.png", "/pool/ingest", true},
		{"dashboard-job.png", "/pool/ingest/job/tenant-07", false},
		{"dashboard-queue.png", "/queue/thumbnails", true},
		{"dashboard-tasks.png", "/queue/thumbnails/tasks?state=dead", false},
		{"dashboard-task.png", "/queue/thumbnails/task/invoice-17", false},
		{"dashboard-tenant.png", "/queue/thumbnails/tenant/acme", false},
	}
	return capture(ctx, base, out, shots)
}

// chromium finds the browser the dashboard's tests use.
func chromium() (string, error) {
	for _, name := range []string{os.Getenv("SHEPHERD_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium found: install Debian's chromium package or set SHEPHERD_CHROMIUM")
}

// capture writes a PNG of each page at 1400 px, once its charts (if any)
// were redrawn at their column's width.
func capture(ctx context.Context, base, out string, shots []shot) error {
	path, err := chromium()
	if err != nil {
		return err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	const fitted = `Array.from(document.querySelectorAll('figure.plot svg')).every(s => Math.abs(s.viewBox.baseVal.width - s.getBoundingClientRect().width) < 8)`
	for _, s := range shots {
		var png []byte
		shoot := chromedp.CaptureScreenshot(&png)
		if s.full {
			shoot = chromedp.FullScreenshot(&png, 100) // 100: PNG
		}
		if err := chromedp.Run(bctx,
			emulation.SetDeviceMetricsOverride(1400, 1000, 1, false),
			chromedp.Navigate(base+s.path),
			chromedp.WaitVisible("main", chromedp.ByQuery),
			chromedp.Poll(fitted, nil, chromedp.WithPollingTimeout(10*time.Second)),
			shoot,
		); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		file := filepath.Join(out, s.file)
		if err := os.WriteFile(file, png, 0o644); err != nil {
			return err
		}
		log.Printf("wrote %s (%d KiB)", file, len(png)/1024)
	}
	return nil
}
