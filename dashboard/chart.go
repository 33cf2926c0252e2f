package dashboard

import (
	"fmt"
	"strings"
	"time"
)

// chart is a small line chart drawn by the server as SVG: no script and
// nothing loaded from elsewhere.
type chart struct {
	Width, Height int
	Max           int64
	Span          string // the time the chart covers, as text
	Lines         []line
	Empty         bool
}

// line is one series of a chart.
type line struct {
	Name   string
	Class  string // CSS class: its color
	Points string // SVG polyline points
	Last   int64
}

const chartW, chartH = 640, 120

// newChart draws the series names of samples.
func newChart(names []string, ss []sample) chart {
	c := chart{Width: chartW, Height: chartH, Empty: len(ss) < 2}
	for _, s := range ss {
		for _, v := range s.Values {
			c.Max = max(c.Max, v)
		}
	}
	top := max(c.Max, 1)
	if len(ss) >= 2 {
		c.Span = ss[len(ss)-1].Time.Sub(ss[0].Time).Round(time.Second).String()
	}
	for i, name := range names {
		l := line{Name: name, Class: fmt.Sprintf("s%d", i)}
		var b strings.Builder
		for j, s := range ss {
			if i >= len(s.Values) {
				continue
			}
			x := 0
			if len(ss) > 1 {
				x = j * chartW / (len(ss) - 1)
			}
			y := chartH - 2 - int(s.Values[i]*(chartH-4)/top)
			fmt.Fprintf(&b, "%d,%d ", x, y)
			l.Last = s.Values[i]
		}
		l.Points = strings.TrimSpace(b.String())
		c.Lines = append(c.Lines, l)
	}
	return c
}
