package suite

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gonetstack/gonet/bench/server"
)

var stackColor = map[string]color.Color{
	"gonet":  color.RGBA{R: 0x00, G: 0x7d, B: 0x9c, A: 0xff}, // Go's blue
	"gvisor": color.RGBA{R: 0xe3, G: 0x6c, B: 0x0a, A: 0xff},
	"kernel": color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
}

var stackTitle = map[string]string{"gonet": "GoNet", "gvisor": "gVisor netstack", "kernel": "Linux kernel (veth)"}

// xyErr is a line's points with their min and max as error bars.
type xyErr struct {
	plotter.XYs
	plotter.YErrors
}

// series returns, for each stack, metric against x(point) over the points
// of workload that keep(point) accepts.
func (r *report) series(workload, metric string, x func(pt string) (float64, bool)) map[string]xyErr {
	out := map[string]xyErr{}
	for _, st := range server.Stacks {
		var s xyErr
		for _, pt := range r.points[workload] {
			xv, ok := x(pt)
			if !ok {
				continue
			}
			v, ok := r.get(workload, pt, st, metric)
			if !ok {
				continue
			}
			s.XYs = append(s.XYs, plotter.XY{X: xv, Y: v.Med})
			s.YErrors = append(s.YErrors, struct{ Low, High float64 }{v.Med - v.Min, v.Max - v.Med})
		}
		if len(s.XYs) > 0 {
			out[st] = s
		}
	}
	return out
}

func lineChart(title, xl, yl string, logX, logY bool, series map[string]xyErr, path string) (err error) {
	return lines(title, xl, yl, logX, logY, series, path, server.Stacks, stackColor, stackTitle)
}

// lines draws a line per series, in order, each in its colour and under
// its title in the legend.
func lines(title, xl, yl string, logX, logY bool, series map[string]xyErr, path string, order []string, colors map[string]color.Color, titles map[string]string) (err error) {
	if len(series) == 0 {
		return errors.New("no data")
	}
	defer func() {
		if v := recover(); v != nil { // gonum/plot panics on some degenerate axes
			err = fmt.Errorf("plot: %v", v)
		}
	}()
	// A log axis needs a range: widen a single value, drop values ≤ 0.
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for st, s := range series {
		var keep xyErr
		for i, v := range s.XYs {
			if (logX && v.X <= 0) || (logY && v.Y <= 0) {
				continue
			}
			keep.XYs = append(keep.XYs, v)
			e := s.YErrors[i]
			if logY && v.Y-e.Low <= 0 {
				e.Low = v.Y / 2
			}
			keep.YErrors = append(keep.YErrors, e)
			xmin, xmax = math.Min(xmin, v.X), math.Max(xmax, v.X)
			ymin, ymax = math.Min(ymin, v.Y-e.Low), math.Max(ymax, v.Y+e.High)
		}
		if len(keep.XYs) == 0 {
			delete(series, st)
		} else {
			series[st] = keep
		}
	}
	if len(series) == 0 {
		return errors.New("no data above zero")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xl
	p.Y.Label.Text = yl
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if xmin == xmax {
		p.X.Min, p.X.Max = xmin/2, xmax*2
	}
	if ymin == ymax || logY {
		p.Y.Min, p.Y.Max = ymin/2, ymax*2
		if ymax <= 0 && !logY {
			p.Y.Min, p.Y.Max = 0, 1 // every value zero: no loss, say
		}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for i, st := range order {
		s, ok := series[st]
		if !ok {
			continue
		}
		l, pts, err := plotter.NewLinePoints(s.XYs)
		if err != nil {
			return err
		}
		l.Color = colors[st]
		l.Width = vg.Points(2)
		pts.Color = colors[st]
		pts.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}}[i%4]
		eb, err := plotter.NewYErrorBars(s)
		if err != nil {
			return err
		}
		eb.Color = colors[st]
		p.Add(l, pts, eb)
		p.Legend.Add(titles[st], l, pts)
	}
	return p.Save(16*vg.Centimeter, 11*vg.Centimeter, path)
}

func nFromPoint(pt string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimPrefix(pt, "n="), 64)
	return v, err == nil
}

// writePlots draws the figures and returns their paths by name.
func writePlots(r *report, dir string) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	add := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		out[name] = filepath.Join(dir, name+".png")
	}
	path := func(name string) string { return filepath.Join(dir, name+".png") }

	add("ping_mean", lineChart("Ping latency under load (mean)", "concurrent pingers", "mean RTT (µs)", true, true,
		r.series("ping", "mean_us", nFromPoint), path("ping_mean")))
	add("ping_p99", lineChart("Ping latency under load (99th percentile)", "concurrent pingers", "p99 RTT (µs)", true, true,
		r.series("ping", "p99_us", nFromPoint), path("ping_p99")))
	add("short", lineChart("Short TCP transfers (4 KB each)", "concurrent clients", "throughput (Mbit/s)", true, false,
		r.series("short", "mbit_s", nFromPoint), path("short")))

	// UDP: received against offered, for the MTU-sized datagrams (or the
	// first size there is).
	size := ""
	for _, pt := range r.points["udp"] {
		s := strings.TrimPrefix(strings.Split(pt, ",")[0], "size=")
		if size == "" || s == "1472" {
			size = s
		}
	}
	udp := r.series("udp", "recv_mbit_s", func(pt string) (float64, bool) {
		if !strings.HasPrefix(pt, "size="+size+",") {
			return 0, false
		}
		v, err := strconv.ParseFloat(strings.TrimPrefix(pt, "size="+size+",rate="), 64)
		if err != nil {
			v = 10000 // "max": plotted at the right edge
		}
		return v, true
	})
	add("udp", lineChart(fmt.Sprintf("UDP, %s-byte datagrams (\"max\" drawn at 10 Gbit/s offered)", size),
		"offered (Mbit/s)", "received (Mbit/s)", true, true, udp, path("udp")))
	if len(r.points["bulk"]) > 0 {
		add("bulk", r.bulkChart(path("bulk")))
	}
	r.writeGatewayPlots(path, add)
	r.writeMultikernelPlots(path, add)
	return out, errors.Join(errs...)
}

// bulkChart is a bar per stack for each bulk point.
func (r *report) bulkChart(path string) error {
	pts := r.points["bulk"]
	if len(pts) == 0 {
		return errors.New("no data")
	}
	p := plot.New()
	p.Title.Text = "Bulk TCP throughput"
	p.Y.Label.Text = "Gbit/s"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	w := vg.Points(14)
	var top float64
	for i, st := range server.Stacks {
		vals := make(plotter.Values, len(pts))
		for j, pt := range pts {
			if s, ok := r.get("bulk", pt, st, "gbit_s"); ok {
				vals[j] = s.Med
				top = math.Max(top, s.Med)
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color = stackColor[st]
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(i-1)
		p.Add(b)
		p.Legend.Add(stackTitle[st], b)
	}
	names := make([]string, len(pts))
	for i, pt := range pts {
		dir, n, _ := strings.Cut(pt, "/")
		names[i] = map[string]string{"up": "kernel→stack", "down": "stack→kernel"}[dir] + " ×" + n
	}
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, top*1.35 // room for the legend
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}
