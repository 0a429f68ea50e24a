package plan

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestGenerateShapes: the generated workflows have the seed's task counts
// (Table 6.3), the shape's task types, no dangling parent, and are the
// same for the same seed.
func TestGenerateShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shape string
		n     int
		types map[string]int // task type -> count
	}{
		{"montage", 25, map[string]int{"mProjectPP": 5, "mDiffFit": 9, "mConcatFit": 1, "mBgModel": 1, "mBackground": 5, "mImgtbl": 1, "mAdd": 1, "mShrink": 1, "mJPEG": 1}},
		{"cybershake", 30, map[string]int{"ExtractSGT": 2, "SeismogramSynthesis": 13, "PeakValCalcOkaya": 13, "ZipSeis": 1, "ZipPSA": 1}},
		{"cybershake", 100, map[string]int{"ExtractSGT": 8, "SeismogramSynthesis": 45, "PeakValCalcOkaya": 45, "ZipSeis": 1, "ZipPSA": 1}},
		{"epigenomics", 24, map[string]int{"fastQSplit": 1, "filterContams": 5, "sol2sanger": 5, "fastq2bfq": 5, "map": 5, "mapMerge": 1, "maqIndex": 1, "pileup": 1}},
		{"epigenomics", 47, map[string]int{"fastQSplit": 2, "filterContams": 10, "sol2sanger": 10, "fastq2bfq": 10, "map": 10, "mapMerge": 3, "maqIndex": 1, "pileup": 1}},
		{"inspiral", 30, map[string]int{"TmpltBank": 7, "Inspiral": 14, "Thinca": 2, "TrigBank": 7}},
		{"inspiral", 100, map[string]int{"TmpltBank": 24, "Inspiral": 48, "Thinca": 4, "TrigBank": 24}},
	} {
		w, err := Generate(tc.shape, tc.n, 7)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		seen := map[string]bool{}
		for _, task := range w.Tasks {
			got[task.Name]++
			for _, p := range task.Parents {
				if !seen[p] {
					t.Errorf("%s_%d: %s's parent %s does not come before it", tc.shape, tc.n, task.ID, p)
				}
			}
			for _, f := range append(append([]string(nil), task.Inputs...), task.Outputs...) {
				if w.FileSizes[f] <= 0 {
					t.Errorf("%s_%d: file %s has no size", tc.shape, tc.n, f)
				}
			}
			seen[task.ID] = true
		}
		if len(w.Tasks) != tc.n || !reflect.DeepEqual(got, tc.types) {
			t.Errorf("%s_%d: %d tasks %v; want %d %v", tc.shape, tc.n, len(w.Tasks), got, tc.n, tc.types)
		}
		again, _ := Generate(tc.shape, tc.n, 7)
		if !reflect.DeepEqual(w, again) {
			t.Errorf("%s_%d: not the same for the same seed", tc.shape, tc.n)
		}
		if _, err := FromWorkflow(w, EC2Platform(10e6, 0.05)); err != nil {
			t.Errorf("%s_%d: %v", tc.shape, tc.n, err)
		}
	}
	if _, err := Generate("sipht", 30, 1); err == nil {
		t.Error("an unknown shape was accepted")
	}
	for _, bad := range []string{"montage", "montage:0", "montage:x", "sipht:30", ":30"} {
		if _, _, err := ParseGen(bad); err == nil {
			t.Errorf("ParseGen(%q) accepted", bad)
		}
	}
}

// TestSeedTrends checks the claims of the seed's section 6.1.2 on the
// generated instances over the seed's four EC2 VMs (Tables 6.4/6.5):
// AEH-ETAA is never worse than HEFT or MinMin; its mean gain over MinMin
// exceeds its mean gain over HEFT (the seed: 22.7% and 11.2%); and it
// gains most where files are big relative to runtimes (CyberShake,
// Montage) and least on the compute-bound Epigenomics and Inspiral, the
// seed's explanation of the spread. Late binding without a plan pulls
// CyberShake's SGT volumes to every site and is far behind.
func TestSeedTrends(t *testing.T) {
	if testing.Short() {
		t.Skip("runs AEH-ETAA to its stall rule on eight workflows")
	}
	t.Parallel()
	ctx := context.Background()
	pl := EC2Platform(10e6, 0.05)
	var gainMM, gainH float64
	byShape := map[string][]float64{}
	specs := []struct {
		shape string
		n     int
	}{{"cybershake", 30}, {"cybershake", 50}, {"montage", 25}, {"montage", 50}, {"epigenomics", 24}, {"epigenomics", 47}, {"inspiral", 30}, {"inspiral", 50}}
	for _, s := range specs {
		w, err := Generate(s.shape, s.n, 1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := FromWorkflow(w, pl)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := HEFT{}.Plan(ctx, p)
		mm, _ := MinMin{}.Plan(ctx, p)
		a, err := AEHETAA{TimeLimit: 5 * time.Minute}.Plan(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if a.Makespan > min(h.Makespan, mm.Makespan)+1e-6 {
			t.Errorf("%s_%d: AEH-ETAA %.0f worse than HEFT %.0f or MinMin %.0f", s.shape, s.n, a.Makespan, h.Makespan, mm.Makespan)
		}
		gh := 1 - a.Makespan/h.Makespan
		gainMM += (1 - a.Makespan/mm.Makespan) / float64(len(specs))
		gainH += gh / float64(len(specs))
		byShape[s.shape] = append(byShape[s.shape], gh)
		if s.shape == "cybershake" {
			late, _, err := LateBinding(p, FirstReady)
			if err != nil || late < 2*a.Makespan {
				t.Errorf("%s_%d: late binding %.0f (%v), not far behind AEH-ETAA %.0f", s.shape, s.n, late, err, a.Makespan)
			}
		}
	}
	if !(gainMM > gainH && gainH > 0.05) {
		t.Errorf("mean gain over MinMin %.1f%%, over HEFT %.1f%%; want the first larger, the second above 5%%", 100*gainMM, 100*gainH)
	}
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	dataHeavy := min(mean(byShape["cybershake"]), mean(byShape["montage"]))
	computeBound := max(mean(byShape["epigenomics"]), mean(byShape["inspiral"]))
	if dataHeavy <= 2*computeBound {
		t.Errorf("gain over HEFT: data-heavy shapes %.1f%%, compute-bound %.1f%%; want the first well above", 100*dataHeavy, 100*computeBound)
	}
	t.Logf("mean gain over MinMin %.1f%%, over HEFT %.1f%%; per shape over HEFT %v", 100*gainMM, 100*gainH, byShape)
}
