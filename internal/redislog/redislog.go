// Package redislog routes the log lines of go-redis itself (failed dials,
// connection pool warnings), which it prints with the standard log
// package by default, into a *slog.Logger.
//
// go-redis has one logger per process, so only programs set it, from
// main: the shepherd command, the examples and the chaos suite's worker.
// Libraries (pool, streaming, rmap) never do; their users decide.
package redislog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Route sends go-redis's log lines to l at level, with source=go-redis.
// What go-redis reports (a refused dial while Redis restarts, a broken
// connection closed) is what the program's own errors already say, so
// programs route it at slog.LevelDebug: silent unless asked for.
func Route(l *slog.Logger, level slog.Level) {
	redis.SetLogger(adapter{l: l, level: level})
}

type adapter struct {
	l     *slog.Logger
	level slog.Level
}

func (a adapter) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !a.l.Enabled(ctx, a.level) {
		return
	}
	a.l.Log(ctx, a.level, strings.TrimSpace(fmt.Sprintf(format, v...)), slog.String("source", "go-redis"))
}
