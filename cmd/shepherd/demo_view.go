package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// progress draws a progress bar: redrawn in place on a terminal, a line
// per quarter elsewhere.
type progress struct {
	w        io.Writer
	total    int
	terminal bool
	shown    int // quarters printed, off a terminal
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, total: total, terminal: isTerminal(w)}
}

func (p *progress) update(done int) {
	if p.terminal {
		fmt.Fprintf(p.w, "\r  %s %d/%d", bar(done, p.total, 40), done, p.total)
		if done == p.total {
			fmt.Fprintln(p.w)
		}
		return
	}
	for p.shown < 4 && done*4 >= (p.shown+1)*p.total {
		p.shown++
		fmt.Fprintf(p.w, "  %s %d/%d\n", bar(p.shown*p.total/4, p.total, 40), p.shown*p.total/4, p.total)
	}
}

// bar returns a bar of width cells filled in proportion n/total.
func bar(n, total, width int) string {
	if total <= 0 {
		return "[" + strings.Repeat(" ", width) + "]"
	}
	full := n * width / total
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", width-full) + "]"
}

// chart writes a horizontal bar chart of count per label, labels sorted;
// the labels in dead get a note.
func chart(w io.Writer, counts map[string]int, labels []string, dead map[string]bool) {
	sort.Strings(labels)
	top := 0
	for _, l := range labels {
		top = max(top, counts[l])
	}
	for _, l := range labels {
		note := ""
		if dead[l] {
			note = "  (crashed)"
		}
		fmt.Fprintf(w, "  %-9s %s %4d%s\n", l, strings.TrimSuffix(strings.TrimPrefix(bar(counts[l], top, 40), "["), "]"), counts[l], note)
	}
}
