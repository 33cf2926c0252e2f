package dashboard

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// plot is a line chart with axes, drawn by the server as SVG: a left
// axis with its unit, an optional right one with its own, a time axis
// labelled in UTC with its title below the labels, and a legend that
// carries each series' numbers (its last value, its peak and, for
// counts, its total), so that the page says what the lines show.
//
// The SVG has a viewBox and fills its column (CSS width: 100%); it is
// drawn for a width in pixels (the page's script sends the width it
// measured, ?cw=), so that its text keeps its size and the time axis
// gets as many labels as fit without touching.
type plot struct {
	ID            string // the figure's id
	Title         string
	Unit          string // the left axis's unit
	RightUnit     string // the right axis's unit, "" for none
	Width, Height int
	// X0, X1, Y0, Y1 are the plot area's edges: left, right, top, bottom.
	X0, X1, Y0, Y1 int
	// YLabelX, RightLabelX and XLabelY place the ticks' labels: the left
	// axis's end, the right axis's start and the time axis's baseline;
	// XTitleX, XTitleY the time axis's title, below its labels.
	YLabelX, RightLabelX, XLabelY int
	XTitleX, XTitleY              int
	YTicks                        []tick // on the left axis
	RightTicks                    []tick
	XTicks                        []tick
	From, To                      string // the first and last times, UTC
	Series                        []plotLine
	Empty                         bool // no series has a value
}

// tick is a mark on an axis at At pixels, with its label.
type tick struct {
	At    int
	Label string
}

// plotLine is one series of a plot, drawn as an SVG path that breaks
// where the series has no value.
type plotLine struct {
	Name  string
	Class string // CSS class: its color
	Path  string // SVG path data
	Right bool   // on the right axis
	Last  string // the last value, "-" for none
	Peak  string // the largest value
	Total string // the sum, for a count; "" otherwise
}

// series is a plot's input: one value per time, NaN where there is none.
type series struct {
	Name   string
	Values []float64
	Right  bool // on the right axis
	Total  bool // the legend gives the sum: the values are counts
}

// The plot's size and margins, in pixels: its default width (before the
// page's script measured its column) and the widths it accepts.
const (
	plotW, plotH           = 640, 200
	plotMinW, plotMaxW     = 280, 2400
	plotLeft, plotRight    = 56, 56
	plotTop, plotBottom    = 26, 40
	plotTicksY             = 4
	plotLabelGap           = 24 // the least space between two time labels
	plotCharW              = 6  // a generous width of a label's character (10px font)
	plotXTitle             = "time (UTC)"
	plotXLabelY, plotTitle = 17, 34 // below the plot area: the time labels' and the title's baselines, clear of the y axes' "0"
)

// plotWidth returns the width a plot is drawn at for a measured column
// width (?cw=): the default when absent or unreadable, else clamped.
func plotWidth(cw string) int {
	w, err := strconv.Atoi(cw)
	if err != nil || w <= 0 {
		return plotW
	}
	return min(max(w, plotMinW), plotMaxW)
}

// newPlot draws series over times (evenly spaced, oldest first) at width
// pixels, the left axis in unit, the right one (if a series is on it) in
// rightUnit.
func newPlot(id, title, unit, rightUnit string, width int, times []time.Time, ss []series) plot {
	width = min(max(width, plotMinW), plotMaxW)
	p := plot{ID: id, Title: title, Unit: unit, Width: width, Height: plotH,
		X0: plotLeft, X1: width - plotRight, Y0: plotTop, Y1: plotH - plotBottom, Empty: true,
		YLabelX: plotLeft - 4, RightLabelX: width - plotRight + 4, XLabelY: plotH - plotBottom + plotXLabelY,
		XTitleX: (plotLeft + width - plotRight) / 2, XTitleY: plotH - plotBottom + plotTitle}
	if len(times) > 0 {
		p.From, p.To = times[0].UTC().Format(clockFormat), times[len(times)-1].UTC().Format(clockFormat)
	}
	var top, rightTop float64
	right := false
	for _, s := range ss {
		for _, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			p.Empty = false
			if s.Right {
				rightTop = max(rightTop, v)
			} else {
				top = max(top, v)
			}
		}
		right = right || s.Right
	}
	var rightStep float64
	top, step := niceScale(top)
	p.YTicks = p.yTicks(top, step)
	if right {
		p.RightUnit = rightUnit
		rightTop, rightStep = niceScale(rightTop)
		p.RightTicks = p.yTicks(rightTop, rightStep)
	}
	p.XTicks = p.xTicks(times)
	for i, s := range ss {
		scaleTop := top
		if s.Right {
			scaleTop = rightTop
		}
		l := plotLine{Name: s.Name, Class: fmt.Sprintf("s%d", i), Right: s.Right, Last: "-", Peak: "-"}
		l.Path = p.path(s.Values, scaleTop)
		var peak, sum float64
		seen := false
		for _, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			peak, sum, seen = max(peak, v), sum+v, true
			l.Last = number(v)
		}
		if seen {
			l.Peak = number(peak)
		}
		if s.Total {
			l.Total = number(sum)
		}
		p.Series = append(p.Series, l)
	}
	return p
}

// x is the pixel of the i-th of n evenly spaced times.
func (p plot) x(i, n int) int {
	if n < 2 {
		return p.X1
	}
	return p.X0 + i*(p.X1-p.X0)/(n-1)
}

// y is the pixel of v on an axis from 0 to top.
func (p plot) y(v, top float64) int {
	return p.Y1 - int(math.Round(v/top*float64(p.Y1-p.Y0)))
}

// path returns the SVG path of values: a move where a run of values
// starts after a gap, and no point in the middle of a flat run (a day
// of idle buckets is one segment, not 1440 points).
func (p plot) path(values []float64, top float64) string {
	var b strings.Builder
	n := len(values)
	flat := func(i int) bool { // values[i] lies on a flat run between its neighbours
		return i > 0 && i < n-1 && values[i] == values[i-1] && values[i] == values[i+1]
	}
	pen := false
	for i, v := range values {
		if math.IsNaN(v) {
			pen = false
			continue
		}
		if pen && flat(i) {
			continue
		}
		cmd := "L"
		if !pen {
			cmd = "M"
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%d %d", cmd, p.x(i, n), p.y(v, top))
		if !pen && (i == n-1 || math.IsNaN(values[i+1])) {
			b.WriteString(" h0") // a value alone between gaps: a dot (round caps)
		}
		pen = true
	}
	return b.String()
}

// yTicks marks 0 to top every step on a y axis.
func (p plot) yTicks(top, step float64) []tick {
	var out []tick
	for i := 0; i <= plotTicksY*2; i++ {
		v := float64(i) * step
		if v > top*(1+1e-9) {
			break
		}
		out = append(out, tick{At: p.y(v, top), Label: number(v)})
	}
	return out
}

// tickSteps are the spacings the time axis may use, the first whose
// labels fit the axis's width winning.
var tickSteps = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
	10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// xTicks marks the round UTC times within times, labelled "15:04" (or
// "15:04:05" when they are less than a minute apart). The spacing is the
// smallest of tickSteps that leaves plotLabelGap pixels between two
// labels, so that labels never touch, however narrow the plot.
func (p plot) xTicks(times []time.Time) []tick {
	if len(times) < 2 {
		return nil
	}
	from, to := times[0], times[len(times)-1]
	span := to.Sub(from)
	if span <= 0 {
		return nil
	}
	pxPer := float64(p.X1-p.X0) / float64(span) // pixels per nanosecond
	every, layout := time.Duration(0), ""
	for _, d := range tickSteps {
		l := "15:04"
		if d < time.Minute {
			l = "15:04:05"
		}
		if float64(d)*pxPer >= float64(len(l)*plotCharW+plotLabelGap) {
			every, layout = d, l
			break
		}
	}
	if every == 0 {
		return nil // not even a day's spacing fits: no label rather than a pile
	}
	var out []tick
	for t := from.Truncate(every); !t.After(to); t = t.Add(every) {
		if t.Before(from) {
			continue
		}
		x := p.X0 + int(float64(t.Sub(from))*pxPer)
		out = append(out, tick{At: x, Label: t.UTC().Format(layout)})
	}
	return out
}

// niceScale returns the top of an axis that holds v, and the step of its
// ticks: a 1, 2 or 5 times a power of ten, about plotTicksY of them. An
// axis of nothing (v = 0) goes to 1.
func niceScale(v float64) (top, step float64) {
	if v <= 0 {
		return 1, 1.0 / plotTicksY
	}
	raw := v / plotTicksY
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return math.Ceil(v/step-1e-9) * step, step
}

// number writes v with at most 3 significant digits after the point:
// 0.3, 12, 2.28, 1500.
func number(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
