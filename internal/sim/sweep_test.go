package sim

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTrends is the regression test on the thesis's chapter 6 trends (not
// its exact values), with 3 seeds of the full 1,000-pipeline workload, on
// table 6.2 as printed and as the thesis ran it (rates per 10 ms unit).
func TestTrends(t *testing.T) {
	t.Parallel()
	s := Sweep{
		Policies:     []string{"fcfs", "sjf", "dc"},
		Placeholders: []int{2, 8, 16, 32},
		Inflations:   []float64{1, 100},
		Networks:     []Platform{WANPrinted, WAN, LAN},
		Seeds:        []uint64{1, 2, 3},
	}
	var runs []Outcome
	if err := s.Run(context.Background(), 0, func(o Outcome) error { runs = append(runs, o); return nil }); err != nil {
		t.Fatal(err)
	}
	get := map[[4]string]Summary{}
	for _, sum := range Summarize(runs) {
		get[[4]string{sum.Network, ftoa(sum.Inflation), itoa(sum.Placeholders), sum.Policy}] = sum
	}
	at := func(net string, inf float64, ph int, pol string) Summary {
		sum, ok := get[[4]string{net, ftoa(inf), itoa(ph), pol}]
		if !ok {
			t.Fatalf("no summary for %s x%g %d %s", net, inf, ph, pol)
		}
		return sum
	}
	for _, net := range []string{"wan-printed", "wan", "lan"} {
		for _, inf := range s.Inflations {
			for _, ph := range s.Placeholders {
				dc := at(net, inf, ph, "dc").DataAffinity.Mean
				other := max(at(net, inf, ph, "fcfs").DataAffinity.Mean, at(net, inf, ph, "sjf").DataAffinity.Mean)
				if dc < 0.45 || dc > 0.5 || dc-other < 0.2 {
					t.Errorf("%s x%g %d placeholders: DC data affinity %.3f, best of FCFS/SJF %.3f; want DC near 0.5 and far above",
						net, inf, ph, dc, other)
				}
			}
		}
	}
	cut := func(net string, inf float64, ph int, metric func(Summary) Stat, a, b string) float64 {
		return 1 - metric(at(net, inf, ph, a)).Mean/metric(at(net, inf, ph, b)).Mean
	}
	makespan := func(s Summary) Stat { return s.Makespan }
	response := func(s Summary) Stat { return s.MeanResponse }
	trends := []struct {
		what        string
		net         string
		inf         float64
		ph          int
		metric      func(Summary) Stat
		a, b        string
		least, most float64 // bounds on 1 - a/b
	}{
		// thesis: 13.5% (WAN x1, 8), 52.8% (WAN x100, 16), 25.0% (LAN x100, 8), 46.0% (response, WAN x100, 32)
		{"WAN x1 makespan, DC vs FCFS", "wan", 1, 8, makespan, "dc", "fcfs", 0.05, 0.30},
		{"WAN x100 makespan, DC vs FCFS", "wan", 100, 16, makespan, "dc", "fcfs", 0.35, 0.70},
		{"LAN x100 makespan, DC vs FCFS", "lan", 100, 8, makespan, "dc", "fcfs", 0.15, 0.40},
		{"WAN x100 response, DC vs SJF", "wan", 100, 32, response, "dc", "sjf", 0.30, 0.70},
		{"WAN (as printed) x100 makespan, DC vs FCFS", "wan-printed", 100, 16, makespan, "dc", "fcfs", 0.35, 1},
		{"WAN (as printed) x100 response, DC vs SJF", "wan-printed", 100, 32, response, "dc", "sjf", 0.30, 1},
	}
	for _, tr := range trends {
		if c := cut(tr.net, tr.inf, tr.ph, tr.metric, tr.a, tr.b); c < tr.least || c > tr.most {
			t.Errorf("%s at %d placeholders: %s is %.1f%% below %s, want %.0f%%-%.0f%%",
				tr.what, tr.ph, tr.a, 100*c, tr.b, 100*tr.least, 100*tr.most)
		}
	}
	// DC's makespan is below FCFS's for x100 files at every count, both networks.
	for _, net := range []string{"wan-printed", "wan", "lan"} {
		for _, ph := range s.Placeholders {
			if d, f := at(net, 100, ph, "dc").Makespan.Mean, at(net, 100, ph, "fcfs").Makespan.Mean; d >= f {
				t.Errorf("%s x100 %d placeholders: DC makespan %.0f not below FCFS %.0f", net, ph, d, f)
			}
		}
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestSweepOrderAndErrors(t *testing.T) {
	t.Parallel()
	s := Sweep{
		Policies: []string{"fcfs", "dc"}, Placeholders: []int{2, 4}, Inflations: []float64{1},
		Networks: []Platform{LAN, WAN}, Seeds: []uint64{1, 2, 3},
		Workload: func(seed uint64) (*Workload, error) { return PA(seed, 64, 16), nil },
	}
	if s.Len() != 24 {
		t.Fatalf("Len %d", s.Len())
	}
	var got []Outcome
	if err := s.Run(context.Background(), 3, func(o Outcome) error { got = append(got, o); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 24 || got[0].Network != "lan" || got[0].Seed != 1 || got[1].Seed != 2 || got[3].Policy != "dc" ||
		got[6].Placeholders != 4 || got[12].Network != "wan" {
		t.Fatalf("grid order wrong: %+v", got[:7])
	}
	for _, o := range got {
		want, err := Run(PA(o.Seed, 64, 16), map[string]Platform{"lan": LAN, "wan": WAN}[o.Network],
			Config{Policy: o.Policy, Placeholders: o.Placeholders, Inflation: o.Inflation, Seed: o.Seed})
		if err != nil || want != o.Result {
			t.Fatalf("sweep result differs from a single run: %+v vs %+v", o.Result, want)
		}
	}
	sums := Summarize(got)
	if len(sums) != 8 || sums[0].Seeds != 3 {
		t.Fatalf("summaries %d, seeds %d", len(sums), sums[0].Seeds)
	}
	var m float64
	for _, o := range got[:3] {
		m += o.Makespan / 3
	}
	if math.Abs(sums[0].Makespan.Mean-m) > 1e-9 || sums[0].Makespan.SD < 0 {
		t.Fatalf("mean %v want %v", sums[0].Makespan.Mean, m)
	}
	stop := errors.New("stop")
	n := 0
	if err := s.Run(context.Background(), 2, func(Outcome) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("emit error: %v after %d", err, n)
	}
	s.Policies = []string{"fcfs", "nope"}
	if err := s.Run(context.Background(), 2, func(Outcome) error { return nil }); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("bad policy: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Policies = []string{"fcfs"}
	if err := s.Run(ctx, 2, func(Outcome) error { return nil }); err == nil {
		t.Fatal("cancelled sweep succeeded")
	}
}

func TestWritePlots(t *testing.T) {
	t.Parallel()
	s := Sweep{
		Policies: []string{"fcfs", "sjf", "dc"}, Placeholders: []int{2, 4, 8}, Inflations: []float64{1, 10},
		Networks: []Platform{WAN}, Seeds: []uint64{1, 2},
		Workload: func(seed uint64) (*Workload, error) { return PA(seed, 64, 16), nil },
	}
	var got []Outcome
	if err := s.Run(context.Background(), 0, func(o Outcome) error { got = append(got, o); return nil }); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := WritePlots(dir, Summarize(got))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2*len(metrics)+1 || filepath.Base(files[0]) != "makespan-wan-x1.svg" || filepath.Base(files[len(files)-1]) != "index.html" {
		t.Fatalf("files %v", files)
	}
	for _, f := range files[:len(files)-1] {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// well-formed XML with one path per policy plus the axes
		dec := xml.NewDecoder(strings.NewReader(string(data)))
		paths := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "path" {
				paths++
			}
		}
		if paths != 4 || !strings.Contains(string(data), ">dc</text>") {
			t.Fatalf("%s: %d paths", f, paths)
		}
	}
	idx, _ := os.ReadFile(files[len(files)-1])
	if strings.Count(string(idx), "<img") != 2*len(metrics) {
		t.Fatalf("index.html: %s", idx)
	}
}

func TestNiceStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want float64 }{{0, 1}, {0.07, 0.1}, {0.11, 0.2}, {3, 5}, {740, 1000}, {1000, 1000}, {math.NaN(), 1}} {
		if got := niceStep(tc.in); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestWritePlotsPlantedLink: a plot's name in DIR that is a link (in a
// shared /tmp/plots another user made first, the names being known) is
// refused, not written through: the file it names is left whole.
func TestWritePlotsPlantedLink(t *testing.T) {
	t.Parallel()
	s := Sweep{
		Policies: []string{"fcfs"}, Placeholders: []int{2}, Inflations: []float64{1},
		Networks: []Platform{WAN}, Seeds: []uint64{1},
		Workload: func(seed uint64) (*Workload, error) { return PA(seed, 8, 4), nil },
	}
	var got []Outcome
	if err := s.Run(context.Background(), 0, func(o Outcome) error { got = append(got, o); return nil }); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"makespan-wan-x1.svg", "index.html"} {
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := WritePlots(dir, Summarize(got)); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("WritePlots with links planted at its names: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("a plot was written through a link: the file holds %.40q", b)
	}
}
