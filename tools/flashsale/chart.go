package flashsale

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writeChart draws the water level — available, locked and sold over time, on_hand dashed —
// as a PNG at path, creating its folder.
func writeChart(path, sku string, samples []Sample) error {
	if len(samples) == 0 {
		return fmt.Errorf("chart %s: no samples", path)
	}
	p := plot.New()
	p.Title.Text = "flash sale " + sku + ": stock water level"
	p.X.Label.Text = "seconds since the sale opened"
	p.Y.Label.Text = "units"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true

	series := []struct {
		name   string
		value  func(Sample) int64
		color  color.RGBA
		dashed bool
	}{
		{"available", func(s Sample) int64 { return s.Available }, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, false},
		{"locked", func(s Sample) int64 { return s.Locked }, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, false},
		{"sold", func(s Sample) int64 { return s.Sold }, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, false},
		{"on_hand", func(s Sample) int64 { return s.OnHand }, color.RGBA{R: 0x88, G: 0x88, B: 0x88, A: 0xff}, true},
	}
	for _, sr := range series {
		xys := make(plotter.XYs, len(samples))
		for i, s := range samples {
			xys[i].X = s.At.Seconds()
			xys[i].Y = float64(sr.value(s))
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("chart %s: %w", path, err)
		}
		l.Color = sr.color
		l.Width = vg.Points(2)
		if sr.dashed {
			l.Width = vg.Points(1)
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(sr.name, l)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	if err := p.Save(9*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return nil
}
