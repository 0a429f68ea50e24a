package web

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// series is one line of a plot.
type series struct {
	Name  string
	Color string
	ts    []time.Time
	vs    []float64
}

func seriesOf(name, color string) series { return series{Name: name, Color: color} }

func (s *series) add(t time.Time, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	s.ts, s.vs = append(s.ts, t), append(s.vs, v)
}

const (
	plotW, plotH       = 560, 180
	padL, padR         = 56, 8
	padT, padB         = 22, 22
	innerW, innerH     = plotW - padL - padR, plotH - padT - padB
	plotLegendRowWidth = 90
	maxPoints          = 300
)

type plotLine struct {
	Name, Color, Points string
	LX, LY              int // legend position
	// Dots mark the points of a sparse series (a line alone would not
	// show a single point).
	Dots [][2]float64
}

type plotData struct {
	Title          string
	W, H           int
	L, T, R, B     int
	Lines          []plotLine
	YMax, YMid     string
	TFrom, TTo     string
	MidY           int
	Empty          bool
	LegendY        int
	ViewBox        string
	InnerW, InnerH int
}

var plotTmpl = template.Must(template.New("plot").Parse(`<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="{{.ViewBox}}" role="img" aria-label="{{.Title}}">
<text x="{{.L}}" y="14" class="ptitle">{{.Title}}</text>
<rect x="{{.L}}" y="{{.T}}" width="{{.InnerW}}" height="{{.InnerH}}" class="pframe"/>
<line x1="{{.L}}" y1="{{.MidY}}" x2="{{.R}}" y2="{{.MidY}}" class="pgrid"/>
<text x="{{.L}}" y="{{.T}}" dx="-4" dy="4" class="pax" text-anchor="end">{{.YMax}}</text>
<text x="{{.L}}" y="{{.MidY}}" dx="-4" dy="4" class="pax" text-anchor="end">{{.YMid}}</text>
<text x="{{.L}}" y="{{.B}}" dx="-4" dy="4" class="pax" text-anchor="end">0</text>
<text x="{{.L}}" y="{{.B}}" dy="16" class="pax">{{.TFrom}}</text>
<text x="{{.R}}" y="{{.B}}" dy="16" class="pax" text-anchor="end">{{.TTo}}</text>
{{if .Empty}}<text x="{{.L}}" y="{{.MidY}}" dx="12" class="pax">no data yet</text>{{end}}
{{range .Lines}}<polyline fill="none" stroke="{{.Color}}" stroke-width="2" points="{{.Points}}"/>{{$c := .Color}}{{range .Dots}}<circle cx="{{index . 0}}" cy="{{index . 1}}" r="3" fill="{{$c}}"/>{{end}}
<rect x="{{.LX}}" y="{{.LY}}" width="10" height="10" fill="{{.Color}}"/><text x="{{.LX}}" y="{{.LY}}" dx="13" dy="9" class="pax">{{.Name}}</text>
{{end}}</svg>`))

// plotSVG draws series as lines over their common time range: SVG made on
// the server, so the page needs no charting library and works offline.
func plotSVG(title string, ss []series) template.HTML {
	d := plotData{Title: title, W: plotW, H: plotH + 16, L: padL, T: padT, R: padL + innerW, B: padT + innerH,
		InnerW: innerW, InnerH: innerH, MidY: padT + innerH/2, ViewBox: fmt.Sprintf("0 0 %d %d", plotW, plotH+16)}
	var t0, t1 time.Time
	ymax := 0.0
	for _, s := range ss {
		for i, t := range s.ts {
			if t0.IsZero() || t.Before(t0) {
				t0 = t
			}
			if t.After(t1) {
				t1 = t
			}
			ymax = max(ymax, s.vs[i])
		}
	}
	d.Empty = t0.IsZero()
	if ymax <= 0 {
		ymax = 1
	}
	ymax = niceCeil(ymax)
	d.YMax, d.YMid = num(ymax), num(ymax/2)
	if !d.Empty {
		d.TFrom, d.TTo = t0.UTC().Format("15:04:05"), t1.UTC().Format("15:04:05")
	}
	span := t1.Sub(t0).Seconds()
	for i, s := range ss {
		// At most maxPoints points a line (the plot is ~500 px wide): every
		// step-th sample, and the last.
		step := max(1, (len(s.ts)+maxPoints-1)/maxPoints)
		pts := make([]byte, 0, 12*min(len(s.ts), maxPoints+1))
		var dots [][2]float64
		for k := 0; k < len(s.ts); k++ {
			if k%step != 0 && k != len(s.ts)-1 {
				continue
			}
			x := float64(padL)
			if span > 0 {
				x += s.ts[k].Sub(t0).Seconds() / span * innerW
			}
			y := float64(padT+innerH) - s.vs[k]/ymax*innerH
			pts = strconv.AppendFloat(pts, x, 'f', 1, 64)
			pts = append(pts, ',')
			pts = strconv.AppendFloat(pts, y, 'f', 1, 64)
			pts = append(pts, ' ')
			if len(s.ts) <= 30 {
				dots = append(dots, [2]float64{math.Round(x*10) / 10, math.Round(y*10) / 10})
			}
		}
		d.Lines = append(d.Lines, plotLine{Name: s.Name, Color: s.Color, Points: strings.TrimSpace(string(pts)),
			LX: padL + i*plotLegendRowWidth, LY: plotH - 2, Dots: dots})
	}
	var b bytes.Buffer
	if err := plotTmpl.Execute(&b, d); err != nil {
		return template.HTML(template.HTMLEscapeString(err.Error()))
	}
	return template.HTML(b.String()) // made by html/template: escaped
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func num(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}
