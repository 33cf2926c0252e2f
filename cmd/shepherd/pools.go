package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/shepherd-go/shepherd/internal/web"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

func init() {
	commands["pools"] = command{summary: "list the pools and queues a Redis holds", run: runPools}
}

// listing is what pools prints.
type listing struct {
	Pools  []poolLine  `json:"pools"`
	Queues []queueLine `json:"queues"`
}

type poolLine struct {
	Name    string `json:"name"`
	Nodes   int    `json:"nodes"`
	Workers int    `json:"workers_live"`
	Jobs    int    `json:"jobs"`
	Orphans int    `json:"orphans"`
}

type queueLine struct {
	Name      string `json:"name"`
	Processes int    `json:"processes"`
	Available int64  `json:"available"`
	InFlight  int64  `json:"in_flight"`
	Dead      int64  `json:"dead"`
}

func runPools(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pools", "pools [-redis ADDR] [-json]", stderr)
	addr := redisFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected arguments %q", fs.Args())
	}
	ctx, cancel := interruptible()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 30*time.Second)
	defer cancelT()
	rdb, err := connect(ctx, *addr)
	if err != nil {
		return fail(stderr, "pools", err)
	}
	defer rdb.Close()
	pools, queues, err := web.Names(ctx, rdb)
	if err != nil {
		return fail(stderr, "pools", err)
	}
	out := listing{Pools: []poolLine{}, Queues: []queueLine{}}
	for _, name := range pools {
		st, err := pool.Inspect(ctx, rdb, name)
		if err != nil {
			return fail(stderr, "pools", err)
		}
		if !st.Exists {
			continue
		}
		l := poolLine{Name: name, Nodes: len(st.Nodes), Jobs: st.Jobs, Orphans: len(st.Orphans)}
		for _, w := range st.Workers {
			if w.Healthy {
				l.Workers++
			}
		}
		out.Pools = append(out.Pools, l)
	}
	for _, name := range queues {
		c, err := queue.NewClient(rdb, name)
		if err != nil {
			return fail(stderr, "pools", err)
		}
		st, err := c.Stats(ctx)
		if err != nil {
			return fail(stderr, "pools", err)
		}
		out.Queues = append(out.Queues, queueLine{Name: name, Processes: len(st.Processes), Available: st.Available, InFlight: st.InFlight, Dead: st.Dead})
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			return fail(stderr, "pools", err)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tNODES\tLIVE WORKERS\tJOBS\tNO LIVE OWNER")
	for _, l := range out.Pools {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", l.Name, l.Nodes, l.Workers, l.Jobs, l.Orphans)
	}
	tw.Flush()
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "QUEUE\tPROCESSES\tAVAILABLE\tIN FLIGHT\tDEAD")
	for _, l := range out.Queues {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", l.Name, l.Processes, l.Available, l.InFlight, l.Dead)
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, "pools", err)
	}
	return exitOK
}
