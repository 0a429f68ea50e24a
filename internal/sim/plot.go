package sim

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mq-hpc/mq/internal/mqhome"
)

// Series is one line of a chart.
type Series struct {
	Name   string
	Y, Err []float64 // one per x; Err may be nil
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

// PlotSVG writes a line chart (hand-written SVG, opens in any browser): x
// is categorical (the placeholder counts, evenly spaced), y starts at 0,
// error bars show Err.
func PlotSVG(w io.Writer, title, xlabel, ylabel string, xs []int, series []Series) error {
	const W, H = 640.0, 400.0
	const left, right, top, bottom = 80.0, 130.0, 40.0, 50.0
	pw, ph := W-left-right, H-top-bottom
	ymax := 0.0
	for _, s := range series {
		for i, y := range s.Y {
			e := 0.0
			if i < len(s.Err) {
				e = s.Err[i]
			}
			ymax = max(ymax, y+e)
		}
	}
	step := niceStep(ymax / 5)
	ymax = math.Max(step, math.Ceil(ymax/step)*step)
	xpos := func(i int) float64 {
		if len(xs) == 1 {
			return left + pw/2
		}
		return left + pw*float64(i)/float64(len(xs)-1)
	}
	ypos := func(y float64) float64 { return top + ph*(1-y/ymax) }

	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(b, `<rect width="%g" height="%g" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(b, `<text x="%g" y="22" text-anchor="middle" font-size="14">%s</text>`+"\n", left+pw/2, html.EscapeString(title))
	// y grid and labels
	for y := 0.0; y <= ymax+step/2; y += step {
		fmt.Fprintf(b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", left, ypos(y), left+pw, ypos(y))
		fmt.Fprintf(b, `<text x="%g" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-6, ypos(y), tick(y, step))
	}
	fmt.Fprintf(b, `<text transform="translate(18 %g) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+ph/2, html.EscapeString(ylabel))
	// axes and x labels
	fmt.Fprintf(b, `<path d="M%g %g V%g H%g" fill="none" stroke="black"/>`+"\n", left, top, top+ph, left+pw)
	for i, x := range xs {
		fmt.Fprintf(b, `<text x="%.1f" y="%g" text-anchor="middle">%d</text>`+"\n", xpos(i), top+ph+18, x)
	}
	fmt.Fprintf(b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", left+pw/2, H-8, html.EscapeString(xlabel))
	// series
	for k, s := range series {
		color := palette[k%len(palette)]
		var d strings.Builder
		for i, y := range s.Y {
			if i >= len(xs) {
				break
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", map[bool]string{true: "M", false: " L"}[i == 0], xpos(i), ypos(y))
		}
		fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", d.String(), color)
		for i, y := range s.Y {
			if i >= len(xs) {
				break
			}
			if i < len(s.Err) && s.Err[i] > 0 {
				fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n",
					xpos(i), ypos(max(y-s.Err[i], 0)), xpos(i), ypos(y+s.Err[i]), color)
			}
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %d: %.4g</title></circle>`+"\n",
				xpos(i), ypos(y), color, html.EscapeString(s.Name), xs[i], y)
		}
		ly := top + 10 + 20*float64(k)
		fmt.Fprintf(b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"/>`+"\n", W-right+15, ly, W-right+40, ly, color)
		fmt.Fprintf(b, `<text x="%g" y="%g" dominant-baseline="middle">%s</text>`+"\n", W-right+46, ly, html.EscapeString(s.Name))
	}
	fmt.Fprintln(b, `</svg>`)
	return b.Flush()
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func tick(y, step float64) string {
	if step >= 1 {
		return fmt.Sprintf("%.0f", y)
	}
	return fmt.Sprintf("%.*f", int(math.Ceil(-math.Log10(step))), y)
}

// metrics are the plotted quantities.
var metrics = []struct {
	file, label string
	get         func(Summary) Stat
}{
	{"makespan", "makespan (s)", func(s Summary) Stat { return s.Makespan }},
	{"affinity", "data affinity (share of tasks)", func(s Summary) Stat { return s.DataAffinity }},
	{"response", "mean response time (s)", func(s Summary) Stat { return s.MeanResponse }},
	{"moved", "bytes moved", func(s Summary) Stat { return s.BytesMoved }},
}

// WritePlots writes one SVG per network, inflation and metric into dir,
// plus index.html showing them all, and returns the files written.
func WritePlots(dir string, sums []Summary) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	type panel struct {
		net string
		inf float64
	}
	var panels []panel
	var xs []int
	var pols []string
	for _, s := range sums {
		if p := (panel{s.Network, s.Inflation}); !slices.Contains(panels, p) {
			panels = append(panels, p)
		}
		if !slices.Contains(xs, s.Placeholders) {
			xs = append(xs, s.Placeholders)
		}
		if !slices.Contains(pols, s.Policy) {
			pols = append(pols, s.Policy)
		}
	}
	slices.Sort(xs)
	var files []string
	var idx strings.Builder
	idx.WriteString("<!doctype html>\n<meta charset=\"utf-8\"><title>mqsim</title>\n<body style=\"font-family:sans-serif\">\n")
	for _, p := range panels {
		fmt.Fprintf(&idx, "<h2>%s, files x%g</h2>\n", html.EscapeString(p.net), p.inf)
		for _, m := range metrics {
			var series []Series
			for _, pol := range pols {
				s := Series{Name: pol, Y: make([]float64, len(xs)), Err: make([]float64, len(xs))}
				for _, sum := range sums {
					if sum.Network == p.net && sum.Inflation == p.inf && sum.Policy == pol {
						i := slices.Index(xs, sum.Placeholders)
						st := m.get(sum)
						s.Y[i], s.Err[i] = st.Mean, st.SD
					}
				}
				series = append(series, s)
			}
			name := fmt.Sprintf("%s-%s-x%g.svg", m.file, safeName(p.net), p.inf)
			path := filepath.Join(dir, name)
			f, err := createPlot(path)
			if err != nil {
				return files, err
			}
			title := fmt.Sprintf("%s, %s, files x%g (mean, ±1 sd)", m.label, p.net, p.inf)
			err = PlotSVG(f, title, "placeholders", m.label, xs, series)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return files, err
			}
			files = append(files, path)
			fmt.Fprintf(&idx, "<img src=\"%s\" alt=\"%s\">\n", html.EscapeString(name), html.EscapeString(title))
		}
	}
	idx.WriteString("</body>\n")
	path := filepath.Join(dir, "index.html")
	f, err := createPlot(path)
	if err != nil {
		return files, err
	}
	_, err = f.WriteString(idx.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return files, err
	}
	return append(files, path), nil
}

// createPlot creates or empties one of the plots' files, never through a
// link, symbolic or hard, nor into another user's file: DIR may be in
// /tmp, where another user could have put links at its names, which are
// known, first.
func createPlot(path string) (*os.File, error) {
	return mqhome.CreateFile(path, 0o644)
}

// safeName turns a network name (maybe a file path) into a file name part.
func safeName(s string) string {
	s = strings.TrimSuffix(filepath.Base(s), filepath.Ext(s))
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, s)
}
