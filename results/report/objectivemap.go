package report

import (
	"bytes"
	"errors"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	gpalette "gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ObjectiveMap is a search's evaluated points over two parameters, each coloured by its
// objective value (simulate -tune's map).
type ObjectiveMap struct {
	// Title heads the plot; X and Y name the parameters, Z the objective.
	Title, X, Y, Z string
	// XLog and YLog draw an axis on a logarithmic scale (for parameters searched on one).
	XLog, YLog bool
	// LowerIsBetter colours low values blue (good) and high ones red; otherwise the reverse.
	LowerIsBetter bool
	// ZLog colours by the logarithm of the objective (for latencies, where one bad
	// candidate would otherwise wash out the differences among the rest).
	ZLog bool
	// Points are the evaluated points; those with a value that is not finite are left out.
	Points []MapPoint
	// Marks are named points drawn on top in black (the defaults, the tuned values).
	Marks []MapMark
}

// MapPoint is an evaluated point: parameter values X and Y, objective Z.
type MapPoint struct{ X, Y, Z float64 }

// MapMark is a named point of an ObjectiveMap.
type MapMark struct {
	Name string
	X, Y float64
}

// colourBarW is the width of the colour bar's column to the right of the map.
const colourBarW = 1.4 * vg.Inch

// ObjectiveMapPNG renders m as a PNG: the points as coloured dots, the marks, and a colour
// bar of the objective. Its bytes depend only on m.
func ObjectiveMapPNG(m ObjectiveMap) ([]byte, error) {
	var pts []MapPoint
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range m.Points {
		if m.ZLog {
			p.Z = math.Log10(p.Z)
		}
		if finite(p.X) && finite(p.Y) && finite(p.Z) {
			pts = append(pts, p)
			lo, hi = min(lo, p.Z), max(hi, p.Z)
		}
	}
	if len(pts) == 0 {
		return nil, errors.New("report: objective map: no point with finite values")
	}
	if hi == lo {
		lo, hi = lo-0.5, hi+0.5
	}
	cm := moreland.SmoothBlueRed()
	cm.SetMin(lo)
	cm.SetMax(hi)
	p := newPlot(m.Title, m.X, m.Y)
	p.Legend.Top, p.Legend.Left = true, false
	if err := addMapPoints(p, pts, cm, m.LowerIsBetter); err != nil {
		return nil, err
	}
	if err := addMapMarks(p, m.Marks); err != nil {
		return nil, err
	}
	for _, ax := range []struct {
		a   *plot.Axis
		log bool
	}{{&p.X, m.XLog}, {&p.Y, m.YLog}} {
		if ax.log && ax.a.Min > 0 {
			ax.a.Scale, ax.a.Tick.Marker = plot.LogScale{}, logTicks{}
		}
	}
	bar := colourBar(m, cm)
	img := vgimg.PngCanvas{Canvas: vgimg.New(plotW, plotH+vg.Inch)}
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -colourBarW, 0, 0))
	bar.Draw(draw.Crop(dc, plotW-colourBarW+vg.Points(24), -vg.Points(12), vg.Points(12), -vg.Points(12)))
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// colourBar is the map's legend of colours: the objective's range, good at the bottom.
func colourBar(m ObjectiveMap, cm gpalette.ColorMap) *plot.Plot {
	bar := plot.New()
	bar.Title.Text = m.Z
	bar.HideX()
	bar.Y.Padding = 0
	if m.ZLog {
		bar.Y.Tick.Marker = powTicks{}
	}
	cb := &plotter.ColorBar{ColorMap: cm, Vertical: true}
	if !m.LowerIsBetter {
		cb.ColorMap = gpalette.Reverse(cm)
	}
	bar.Add(cb)
	return bar
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// addMapPoints adds one dot per point in its value's colour (reversed when higher is better).
func addMapPoints(p *plot.Plot, pts []MapPoint, cm gpalette.ColorMap, lowerIsBetter bool) error {
	xys := make(plotter.XYs, len(pts))
	for i, q := range pts {
		xys[i] = xy(q.X, q.Y)
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	s.GlyphStyleFunc = func(i int) draw.GlyphStyle {
		z := pts[i].Z
		if !lowerIsBetter {
			z = cm.Max() - (z - cm.Min())
		}
		c, err := cm.At(z)
		if err != nil {
			c = color.Gray{Y: 128}
		}
		return draw.GlyphStyle{Color: c, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}
	}
	p.Add(s)
	return nil
}

// addMapMarks draws the marks in black, each with its own glyph and a legend entry.
func addMapMarks(p *plot.Plot, marks []MapMark) error {
	shapes := []draw.GlyphDrawer{draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}}
	for i, mk := range marks {
		if !finite(mk.X) || !finite(mk.Y) {
			continue
		}
		s, err := plotter.NewScatter(plotter.XYs{xy(mk.X, mk.Y)})
		if err != nil {
			return err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(6), Shape: shapes[i%len(shapes)]}
		p.Add(s)
		p.Legend.Add(mk.Name, s)
	}
	return nil
}

// powTicks labels an axis of base-10 logarithms with the values themselves: 1, 2 and 5
// times the powers of ten within it, or the default ticks' values where fewer than two fit.
type powTicks struct{}

// Ticks returns the axis' ticks between min and max (logarithms).
func (powTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(min); e <= math.Ceil(max); e++ {
		for _, k := range []float64{1, 2, 5} {
			v := k * math.Pow(10, e)
			if l := math.Log10(v); l >= min && l <= max {
				out = append(out, plot.Tick{Value: l, Label: tickLabel(v)})
			}
		}
	}
	if len(out) >= 2 {
		return out
	}
	out = plot.DefaultTicks{}.Ticks(min, max)
	for i := range out {
		if out[i].Label != "" {
			out[i].Label = tickLabel(math.Pow(10, out[i].Value))
		}
	}
	return out
}

// tickLabel writes a tick's value to 3 significant digits, plainly: 20000, 0.5, 2510.
func tickLabel(v float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}
