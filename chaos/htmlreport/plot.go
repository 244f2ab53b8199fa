package htmlreport

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// The palette: one meaning per colour across every panel.
var (
	colFault    = color.NRGBA{R: 239, G: 83, B: 80, A: 46}
	colPhase    = color.RGBA{R: 90, G: 90, B: 90, A: 255}
	colGood     = color.RGBA{R: 46, G: 125, B: 50, A: 255}
	colBad      = color.RGBA{R: 198, G: 40, B: 40, A: 255}
	colBusy     = color.RGBA{R: 245, G: 166, B: 35, A: 255}
	colOff      = color.RGBA{R: 224, G: 224, B: 224, A: 255}
	colWrites   = color.RGBA{R: 30, G: 136, B: 229, A: 255}
	colReads    = color.RGBA{R: 126, G: 87, B: 194, A: 255}
	colLatency  = color.RGBA{R: 0, G: 137, B: 123, A: 255}
	colLatMax   = color.RGBA{R: 128, G: 203, B: 196, A: 255}
	colReconcil = color.RGBA{R: 63, G: 81, B: 181, A: 255}
)

// panelHeight is the height of one panel of a scenario's timeline.
const (
	plotWidth   = 26 * vg.Centimeter
	panelHeight = 3.6 * vg.Centimeter
)

// timeline draws one scenario's timeline as SVG: panels on one time axis
// (seconds since the fault was requested), each with the fault window
// shaded and the phases marked. The workload's panels are drawn when it
// ran; the API proxy's actions when a view fault made some.
func timeline(res *report.Result) ([]byte, error) {
	s := res.Series
	workload := s != nil && len(s.Writes) > 0
	if !workload && len(res.Injections) == 0 {
		return nil, nil
	}
	if s == nil {
		s = &report.Series{}
	}
	t0, xmin, xmax := span(res)
	sec := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	marks := phaseMarks(res, sec)
	// The grid and the fault window go first, behind the data.
	newPanel := func() *plot.Plot {
		p := plot.New()
		p.Add(plotter.NewGrid())
		p.Add(marks...)
		return p
	}
	panels := []*plot.Plot{conditionsPanel(newPanel(), res, sec, xmin, xmax), podsPanel(newPanel(), s, sec)}
	if workload {
		panels = append(panels, workloadPanel(newPanel(), s, sec), latencyPanel(newPanel(), s, sec))
	}
	panels = append(panels, operatorPanel(newPanel(), s, sec))
	if len(res.Injections) > 0 {
		panels = append(panels, injectionsPanel(newPanel(), res.Injections, sec))
	}
	for i, p := range panels {
		p.X.Min, p.X.Max = xmin, xmax
		p.Title.TextStyle.Font.Size = vg.Points(9)
		p.Title.Padding = vg.Points(2)
		p.Y.Label.TextStyle.Font.Size = vg.Points(8)
		p.Y.Tick.Label.Font.Size = vg.Points(8)
		p.X.Tick.Label.Font.Size = vg.Points(8)
		if i < len(panels)-1 {
			p.X.Tick.Marker = unlabelled{}
		} else {
			p.X.Label.Text = "seconds since the fault was requested (shaded: fault in force)"
			p.X.Label.TextStyle.Font.Size = vg.Points(8)
		}
	}
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	height := panelHeight * vg.Length(len(panels))
	canvas := vgsvg.New(plotWidth, height)
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(2), PadBottom: vg.Points(2), PadLeft: vg.Points(10), PadRight: vg.Points(6)}
	for i, c := range plot.Align(rows, tiles, dc) {
		panels[i].Draw(c[0])
	}
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// phaseMarks shades the fault window and marks injection, heal and
// convergence.
func phaseMarks(res *report.Result, sec func(time.Time) float64) []plot.Plotter {
	ph := res.Phases
	var out []plot.Plotter
	if !ph.Requested.IsZero() {
		end := ph.Healed
		if end.IsZero() {
			end = ph.Converged
		}
		if !end.IsZero() {
			out = append(out, &band{x0: sec(ph.Requested), x1: sec(end), color: colFault})
		}
	}
	for _, t := range []time.Time{ph.Injected, ph.Healed, ph.Converged} {
		if !t.IsZero() {
			out = append(out, &vline{x: sec(t)})
		}
	}
	return out
}

// conditionStates maps a condition's status to its colour: True is good for
// Available, busy for Progressing and bad for Degraded.
func conditionColor(typ, status string) color.Color {
	if status != "True" {
		if typ == "Available" && status == "False" {
			return colBad
		}
		return colOff
	}
	switch typ {
	case "Available":
		return colGood
	case "Degraded":
		return colBad
	}
	return colBusy
}

func conditionsPanel(p *plot.Plot, res *report.Result, sec func(time.Time) float64, xmin, xmax float64) *plot.Plot {
	p.Title.Text = "conditions, from watch events: Available (green), Progressing (amber), Degraded or Available=False (red), False (grey)"
	types := conditionTypes(res.Timeline)
	l := &lanes{}
	for lane, typ := range types {
		for i, smp := range res.Timeline {
			end := xmax
			if i+1 < len(res.Timeline) {
				end = sec(res.Timeline[i+1].At)
			}
			start := max(sec(smp.At), xmin)
			if end <= start {
				continue
			}
			status, _, _ := strings.Cut(smp.Conditions[typ], "/")
			l.segs = append(l.segs, segment{lane: lane, x0: start, x1: end, color: conditionColor(typ, status)})
		}
	}
	p.Add(l)
	p.Y.Min, p.Y.Max = 0, 1
	if len(types) > 0 { // gonum's NominalY indexes its first name
		p.NominalY(types...)
		p.Y.Min, p.Y.Max = -0.6, float64(len(types))-0.4
	}
	return p
}

// conditionTypes are the condition types in the timeline, in a fixed order:
// Available, Progressing and Degraded first, then any other.
func conditionTypes(tl []report.Sample) []string {
	seen := map[string]bool{}
	for _, s := range tl {
		for t := range s.Conditions {
			seen[t] = true
		}
	}
	var out []string
	for _, t := range []string{"Available", "Progressing", "Degraded"} {
		if seen[t] {
			out = append(out, t)
			delete(seen, t)
		}
	}
	rest := make([]string, 0, len(seen))
	for t := range seen {
		rest = append(rest, t)
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// maxLaneLabel bounds a pod's name on its lane, so that a long generated
// name does not squeeze every panel of the timeline.
const maxLaneLabel = 16

// podGlyphs draws each kind of pod event.
var podGlyphs = []struct {
	event string
	shape draw.GlyphDrawer
	color color.Color
}{
	{report.PodDeleted, draw.PyramidGlyph{}, colBad},
	{report.PodRestarted, draw.CrossGlyph{}, colBad},
	{report.PodNotReady, draw.RingGlyph{}, colBusy},
	{report.PodCreated, draw.BoxGlyph{}, colWrites},
	{report.PodReady, draw.CircleGlyph{}, colGood},
}

func podsPanel(p *plot.Plot, s *report.Series, sec func(time.Time) float64) *plot.Plot {
	p.Title.Text = "pods, sampled every second: ▲ deleted, × container restarted, ○ not ready, ■ created, ● ready"
	var names []string
	for _, e := range s.Pods {
		if !slices.Contains(names, e.Pod) {
			names = append(names, e.Pod)
		}
	}
	slices.Sort(names)
	short := make([]string, len(names))
	for i, n := range names {
		_, short[i], _ = strings.Cut(n, "/")
		if r := []rune(short[i]); len(r) > maxLaneLabel {
			short[i] = "…" + string(r[len(r)-maxLaneLabel+1:])
		}
	}
	for k, g := range podGlyphs {
		// Each kind sits a little above or below the lane, so that a pod
		// deleted and created within one sample shows both.
		dy := (float64(k) - float64(len(podGlyphs)-1)/2) * 0.12
		var xys plotter.XYs
		for _, e := range s.Pods {
			if e.Event == g.event {
				xys = append(xys, plotter.XY{X: sec(e.At), Y: float64(slices.Index(names, e.Pod)) + dy})
			}
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			continue
		}
		sc.GlyphStyle = draw.GlyphStyle{Shape: g.shape, Color: g.color, Radius: vg.Points(3)}
		p.Add(sc)
	}
	if len(names) == 0 {
		p.Title.Text += ": no pod changed"
		p.Y.Min, p.Y.Max = 0, 1
		p.HideY()
		return p
	}
	p.NominalY(short...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(names))-0.4
	return p
}

func workloadPanel(p *plot.Plot, s *report.Series, sec func(time.Time) float64) *plot.Plot {
	p.Title.Text = fmt.Sprintf("workload per %d ms: acknowledged writes (blue) and reads (purple), failed or ambiguous operations (red)", s.BucketMillis)
	x := func(i int) float64 { return sec(s.Start) + float64(i)*float64(s.BucketMillis)/1000 }
	add := func(vals []int, c color.Color) {
		xys := make(plotter.XYs, len(vals))
		for i, v := range vals {
			xys[i] = plotter.XY{X: x(i), Y: float64(v)}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return
		}
		l.Color = c
		l.StepStyle = plotter.PostStep
		p.Add(l)
	}
	add(s.Reads, colReads)
	add(s.Writes, colWrites)
	add(s.Errors, colBad)
	p.Y.Min = 0
	return p
}

func latencyPanel(p *plot.Plot, s *report.Series, sec func(time.Time) float64) *plot.Plot {
	p.Title.Text = "latency (ms) of the operations that completed in each bucket: median (dark), max (light)"
	x := func(i int) float64 { return sec(s.Start) + float64(i)*float64(s.BucketMillis)/1000 }
	// A bucket where nothing completed has no latency: each run of
	// buckets that have one is its own line, so a stall shows as a gap.
	add := func(vals []float64, c color.Color, w vg.Length) {
		var run plotter.XYs
		flush := func() {
			if len(run) == 1 {
				run = append(run, plotter.XY{X: run[0].X + float64(s.BucketMillis)/1000, Y: run[0].Y})
			}
			if l, err := plotter.NewLine(run); err == nil && len(run) > 0 {
				l.Color, l.Width = c, w
				p.Add(l)
			}
			run = nil
		}
		for i, v := range vals {
			if v <= 0 {
				flush()
				continue
			}
			run = append(run, plotter.XY{X: x(i), Y: v})
		}
		flush()
	}
	add(s.LatencyMaxMillis, colLatMax, vg.Points(1))
	add(s.LatencyP50Millis, colLatency, vg.Points(1))
	p.Y.Min = 0
	return p
}

// operatorPanel draws the operator's reconciles and errors per second from
// the sampled counters; a counter that went down (the operator restarted)
// counts from zero again, and a scrape that failed is marked.
func operatorPanel(p *plot.Plot, s *report.Series, sec func(time.Time) float64) *plot.Plot {
	p.Title.Text = "operator, scraped every second: reconciles/s (indigo), reconcile errors/s (red), × metrics unreachable"
	var rec, errs, down plotter.XYs
	var prev *report.OperatorSample
	for i := range s.Operator {
		cur := &s.Operator[i]
		if !cur.Up {
			down = append(down, plotter.XY{X: sec(cur.At), Y: 0})
			continue
		}
		if prev != nil {
			dt := cur.At.Sub(prev.At).Seconds()
			dr, de := cur.Reconciles-prev.Reconciles, cur.Errors-prev.Errors
			if dr < 0 { // a new process: its counters started at zero
				dr, de = cur.Reconciles, cur.Errors
			}
			if dt > 0 {
				rec = append(rec, plotter.XY{X: sec(cur.At), Y: dr / dt})
				errs = append(errs, plotter.XY{X: sec(cur.At), Y: max(de, 0) / dt})
			}
		}
		prev = cur
	}
	for _, l := range []struct {
		xys plotter.XYs
		c   color.Color
	}{{rec, colReconcil}, {errs, colBad}} {
		if len(l.xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(l.xys)
		if err != nil {
			continue
		}
		line.Color = l.c
		p.Add(line)
	}
	if len(down) > 0 {
		sc, err := plotter.NewScatter(down)
		if err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Shape: draw.CrossGlyph{}, Color: colBad, Radius: vg.Points(3)}
			p.Add(sc)
		}
	}
	p.Y.Min = 0
	if len(rec) == 0 {
		p.Y.Max = 1
	}
	return p
}

// band shades [x0, x1] over the whole height of a panel.
type band struct {
	x0, x1 float64
	color  color.Color
}

// Plot implements plot.Plotter.
func (b *band) Plot(c draw.Canvas, p *plot.Plot) {
	tx, _ := p.Transforms(&c)
	x0, x1 := max(tx(b.x0), c.Min.X), min(tx(b.x1), c.Max.X)
	if x1 <= x0 {
		return
	}
	c.SetColor(b.color)
	c.Fill(rect(x0, c.Min.Y, x1, c.Max.Y))
}

// vline marks a moment over the whole height of a panel.
type vline struct{ x float64 }

// Plot implements plot.Plotter.
func (v *vline) Plot(c draw.Canvas, p *plot.Plot) {
	tx, _ := p.Transforms(&c)
	x := tx(v.x)
	if x < c.Min.X || x > c.Max.X {
		return
	}
	c.StrokeLine2(draw.LineStyle{Color: colPhase, Width: vg.Points(0.6), Dashes: []vg.Length{vg.Points(3), vg.Points(2)}}, x, c.Min.Y, x, c.Max.Y)
}

// segment is a stretch of one lane in one colour.
type segment struct {
	lane   int
	x0, x1 float64
	color  color.Color
}

// lanes draws horizontal bars, one lane per nominal Y value.
type lanes struct{ segs []segment }

// Plot implements plot.Plotter.
func (l *lanes) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	for _, s := range l.segs {
		x0, x1 := max(tx(s.x0), c.Min.X), min(tx(s.x1), c.Max.X)
		if x1 <= x0 {
			continue
		}
		c.SetColor(s.color)
		c.Fill(rect(x0, ty(float64(s.lane)-0.32), x1, ty(float64(s.lane)+0.32)))
	}
}

func rect(x0, y0, x1, y1 vg.Length) vg.Path {
	var r vg.Path
	r.Move(vg.Point{X: x0, Y: y0})
	r.Line(vg.Point{X: x1, Y: y0})
	r.Line(vg.Point{X: x1, Y: y1})
	r.Line(vg.Point{X: x0, Y: y1})
	r.Close()
	return r
}

// unlabelled places the default ticks without their labels, for the
// panels above the one that labels the shared time axis.
type unlabelled struct{}

// Ticks implements plot.Ticker.
func (unlabelled) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		ts[i].Label = ""
	}
	return ts
}
