package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/wfformat"
)

// Shapes are the workflow shapes Generate builds: the four the seed's
// Table 6.3 takes from the Pegasus workflow generator (Bharathi et al.,
// "Characterization of scientific workflows", 2008).
var Shapes = []string{"montage", "cybershake", "epigenomics", "inspiral"}

// A task type's mean runtime (seconds) and the mean sizes (bytes) of what
// it writes. The values follow the published profiles of the generator's
// instances (Montage_25, CyberShake_30..100, GENOME, Inspiral_1000: task
// counts, mean runtimes and data in/out per type); they are means to draw
// around, not the generator's code.
const (
	mb = 1 << 20

	// Montage: I/O-heavy, short tasks.
	mProjectRT, mDiffRT, mConcatRT, mBgModelRT = 13.6, 10.6, 0.72, 1.42
	mBackgroundRT, mImgtblRT, mAddRT           = 10.7, 1.39, 3.03
	mShrinkRT, mJPEGRT                         = 3.86, 0.45
	mRawSize, mProjSize, mDiffSize             = 4.0 * mb, 4.0 * mb, 0.39 * mb
	mMosaicPerImage                            = 17.7 * mb

	// CyberShake: huge static SGTs, big extracted SGTs, tiny seismograms.
	csExtractRT, csSynthRT, csPeakRT, csZipRT = 140, 40, 1.08, 0.8
	csSGTSize, csSubSGTSize, csSeisSize       = 19000 * mb, 245 * mb, 0.023 * mb
	csPeakSize                                = 216

	// Epigenomics: map dominates the runtime; it and pileup read the
	// reference genome.
	epSplitRT, epFilterRT, epSangerRT, epBfqRT = 60, 1.4, 0.37, 0.68
	epMapRT, epLaneMergeRT, epMergeRT          = 2000, 19, 137
	epIndexRT, epPileupRT                      = 0.18, 1000
	epChunkSize, epFilteredSize, epSangerSize  = 10.5 * mb, 5.3 * mb, 4.3 * mb
	epBfqSize, epMapSize, epRefSize            = 1.0 * mb, 1.1 * mb, 1950 * mb

	// Inspiral (LIGO): CPU-heavy Inspiral tasks over frame data, small
	// outputs.
	liBankRT, liInspiralRT, liThincaRT, liTrigRT = 18.1, 462, 5.3, 5.1
	liFrameSize, liBankSize, liInspSize          = 38.6 * mb, 0.94 * mb, 0.3 * mb
	liThincaSize, liTrigSize                     = 0.035 * mb, 0.012 * mb
)

// Generate builds a workflow of about n tasks in the named shape, its
// runtimes drawn around each task type's mean (x U(0.75, 1.25)) and its
// file sizes around theirs (x U(0.9, 1.1)) by seed. Files no task writes
// (the workflow's inputs) are FromWorkflow's static inputs, kept at the
// platform's home site.
func Generate(shape string, n int, seed uint64) (*wfformat.Workflow, error) {
	if n < 1 || n > wfformat.MaxTasks {
		return nil, fmt.Errorf("plan: %d tasks; want 1..%d", n, wfformat.MaxTasks)
	}
	g := &gen{
		r:      rand.New(rand.NewPCG(seed, 0x6e6)),
		w:      &wfformat.Workflow{Name: fmt.Sprintf("%s_%d", shape, n), FileSizes: map[string]int64{}},
		writer: map[string]string{},
	}
	switch shape {
	case "montage":
		g.montage(n)
	case "cybershake":
		g.cybershake(n)
	case "epigenomics":
		g.epigenomics(n)
	case "inspiral":
		g.inspiral(n)
	default:
		return nil, fmt.Errorf("plan: unknown workflow shape %q (have %s)", shape, strings.Join(Shapes, ", "))
	}
	return g.w, nil
}

// ParseGen reads SHAPE:N (a generated workflow's spec, as mqsim takes it).
func ParseGen(spec string) (shape string, n int, err error) {
	shape, num, ok := strings.Cut(spec, ":")
	if ok {
		n, err = strconv.Atoi(num)
	}
	if !ok || err != nil || n < 1 || n > 100000 {
		return "", 0, fmt.Errorf("%q: want SHAPE:TASKS, TASKS 1..100000", spec)
	}
	for _, s := range Shapes {
		if s == shape {
			return shape, n, nil
		}
	}
	return "", 0, fmt.Errorf("%q: unknown shape %q (have %s)", spec, shape, strings.Join(Shapes, ", "))
}

type gen struct {
	r      *rand.Rand
	w      *wfformat.Workflow
	writer map[string]string // file -> the task writing it
}

// task adds a task; parents are derived from the files it reads, so
// every task must come after the writers of its inputs.
func (g *gen) task(name string, rt float64, ins []string, outs map[string]float64) string {
	id := fmt.Sprintf("%s_%05d", name, len(g.w.Tasks)+1)
	t := wfformat.Task{ID: id, Name: name, Runtime: rt * (0.75 + 0.5*g.r.Float64()), Cores: 1, Inputs: ins}
	parents := map[string]bool{}
	for _, in := range ins {
		if p, ok := g.writer[in]; ok {
			parents[p] = true
		}
	}
	for p := range parents {
		t.Parents = append(t.Parents, p)
	}
	sort.Strings(t.Parents)
	keys := make([]string, 0, len(outs))
	for f := range outs {
		keys = append(keys, f)
	}
	sort.Strings(keys)
	for _, f := range keys {
		t.Outputs = append(t.Outputs, f)
		g.w.FileSizes[f] = g.size(outs[f])
		g.writer[f] = id
	}
	g.w.Tasks = append(g.w.Tasks, t)
	return id
}

func (g *gen) size(mean float64) int64 { return int64(math.Round(mean * (0.9 + 0.2*g.r.Float64()))) }

// static declares a workflow input.
func (g *gen) static(name string, mean float64) string {
	if _, ok := g.w.FileSizes[name]; !ok {
		g.w.FileSizes[name] = g.size(mean)
	}
	return name
}

// montage: k mProjectPP, d mDiffFit over pairs of overlapping images,
// mConcatFit, mBgModel, k mBackground, mImgtbl, mAdd, mShrink, mJPEG
// (Montage_25: k 5, d 9).
func (g *gen) montage(n int) {
	k := max(2, int(math.Round(float64(n-6)/3.8)))
	d := min(max(n-6-2*k, 1), k*(k-1)/2)
	hdr := g.static("region.hdr", 300)
	for i := range k {
		raw := g.static(fmt.Sprintf("raw_%d.fits", i), mRawSize)
		g.task("mProjectPP", mProjectRT, []string{raw, hdr}, map[string]float64{
			fmt.Sprintf("p_%d.fits", i): mProjSize, fmt.Sprintf("p_%d_area.fits", i): mProjSize})
	}
	// Overlaps: neighbours first (i, i+1), then (i, i+2), ...
	var fits []string
	for gap := 1; len(fits) < d; gap++ {
		for i := 0; i+gap < k && len(fits) < d; i++ {
			j := i + gap
			f := fmt.Sprintf("fit_%d_%d.txt", i, j)
			g.task("mDiffFit", mDiffRT, []string{
				fmt.Sprintf("p_%d.fits", i), fmt.Sprintf("p_%d_area.fits", i),
				fmt.Sprintf("p_%d.fits", j), fmt.Sprintf("p_%d_area.fits", j), hdr},
				map[string]float64{f: 2000, fmt.Sprintf("diff_%d_%d.fits", i, j): mDiffSize})
			fits = append(fits, f)
		}
	}
	g.task("mConcatFit", mConcatRT, fits, map[string]float64{"fits.tbl": 2000})
	g.task("mBgModel", mBgModelRT, []string{"fits.tbl"}, map[string]float64{"corrections.tbl": 500})
	var bg []string
	for i := range k {
		c, a := fmt.Sprintf("c_%d.fits", i), fmt.Sprintf("c_%d_area.fits", i)
		g.task("mBackground", mBackgroundRT, []string{fmt.Sprintf("p_%d.fits", i), fmt.Sprintf("p_%d_area.fits", i), "corrections.tbl"},
			map[string]float64{c: mProjSize, a: mProjSize})
		bg = append(bg, c, a)
	}
	g.task("mImgtbl", mImgtblRT, bg, map[string]float64{"images.tbl": 2000})
	g.task("mAdd", mAddRT, append([]string{"images.tbl", hdr}, bg...), map[string]float64{"mosaic.fits": mMosaicPerImage * float64(k)})
	g.task("mShrink", mShrinkRT, []string{"mosaic.fits"}, map[string]float64{"shrunk.fits": mMosaicPerImage * float64(k) / 50})
	g.task("mJPEG", mJPEGRT, []string{"shrunk.fits"}, map[string]float64{"mosaic.jpg": 0.2 * mb})
}

// cybershake: r ExtractSGT (one per rupture, reading the site's two SGT
// volumes), v SeismogramSynthesis spread over the ruptures, one
// PeakValCalcOkaya per seismogram, ZipSeis and ZipPSA (CyberShake_30:
// r 2, v 13; CyberShake_100: r 8, v 45).
func (g *gen) cybershake(n int) {
	r := max(1, int(math.Round(float64(n)*0.08)))
	v := max(1, (n-2-r)/2)
	sx, sy := g.static("sgt_x.sgt", csSGTSize), g.static("sgt_y.sgt", csSGTSize)
	for i := range r {
		g.task("ExtractSGT", csExtractRT, []string{sx, sy}, map[string]float64{
			fmt.Sprintf("sub_%d_x.sgt", i): csSubSGTSize, fmt.Sprintf("sub_%d_y.sgt", i): csSubSGTSize})
	}
	var seis, peaks []string
	for i := range v {
		rup := i % r
		s := fmt.Sprintf("seis_%d.grm", i)
		g.task("SeismogramSynthesis", csSynthRT, []string{fmt.Sprintf("sub_%d_x.sgt", rup), fmt.Sprintf("sub_%d_y.sgt", rup)},
			map[string]float64{s: csSeisSize})
		seis = append(seis, s)
	}
	for i, s := range seis {
		p := fmt.Sprintf("peak_%d.bsa", i)
		g.task("PeakValCalcOkaya", csPeakRT, []string{s}, map[string]float64{p: csPeakSize})
		peaks = append(peaks, p)
	}
	g.task("ZipSeis", csZipRT, seis, map[string]float64{"seis.zip": csSeisSize * float64(v) / 6})
	g.task("ZipPSA", csZipRT/2, peaks, map[string]float64{"psa.zip": csPeakSize * float64(v) / 4})
}

// epigenomics: per lane fastQSplit into chunks, each chunk through
// filterContams, sol2sanger, fastq2bfq and map, a mapMerge per lane, a
// global mapMerge when there are lanes to merge, maqIndex and pileup
// (Epigenomics_24: one lane of 5 chunks; _47: two lanes of 5).
func (g *gen) epigenomics(n int) {
	lanes := max(1, int(math.Round(float64(n)/24)))
	extra := 2
	if lanes > 1 {
		extra = 3
	}
	chunks := max(lanes, (n-2*lanes-extra)/4)
	ref := g.static("reference.bfa", epRefSize)
	var merged []string
	for l := range lanes {
		c := chunks / lanes
		if l < chunks%lanes {
			c++
		}
		in := g.static(fmt.Sprintf("lane_%d.sfq", l), epChunkSize*float64(c))
		outs := map[string]float64{}
		for i := range c {
			outs[fmt.Sprintf("chunk_%d_%d.sfq", l, i)] = epChunkSize
		}
		g.task("fastQSplit", epSplitRT, []string{in}, outs)
		var maps []string
		for i := range c {
			s := fmt.Sprintf("%d_%d", l, i)
			g.task("filterContams", epFilterRT, []string{"chunk_" + s + ".sfq"}, map[string]float64{"filtered_" + s + ".sfq": epFilteredSize})
			g.task("sol2sanger", epSangerRT, []string{"filtered_" + s + ".sfq"}, map[string]float64{"sanger_" + s + ".fq": epSangerSize})
			g.task("fastq2bfq", epBfqRT, []string{"sanger_" + s + ".fq"}, map[string]float64{"reads_" + s + ".bfq": epBfqSize})
			g.task("map", epMapRT, []string{"reads_" + s + ".bfq", ref}, map[string]float64{"map_" + s + ".map": epMapSize})
			maps = append(maps, "map_"+s+".map")
		}
		m := fmt.Sprintf("lane_%d.map", l)
		g.task("mapMerge", epLaneMergeRT, maps, map[string]float64{m: epMapSize * float64(c)})
		merged = append(merged, m)
	}
	all := merged[0]
	if lanes > 1 {
		g.task("mapMerge", epMergeRT, merged, map[string]float64{"all.map": epMapSize * float64(chunks)})
		all = "all.map"
	}
	g.task("maqIndex", epIndexRT, []string{all}, map[string]float64{"all.idx": epMapSize * float64(chunks)})
	g.task("pileup", epPileupRT, []string{"all.idx", ref}, map[string]float64{"all.pileup": 20 * mb})
}

// inspiral: groups, each of k TmpltBank, k Inspiral, a Thinca, k
// TrigBank, k Inspiral and a Thinca; every Inspiral reads its frame data
// (Inspiral_30: one group of 7; Inspiral_100: two of 12).
func (g *gen) inspiral(n int) {
	groups := max(1, int(math.Round(float64(n)/50)))
	total := max(groups, (n-2*groups)/4)
	for gr := range groups {
		k := total / groups
		if gr < total%groups {
			k++
		}
		var insp []string
		for i := range k {
			s := fmt.Sprintf("%d_%d", gr, i)
			frame := g.static("frame_"+s+".gwf", liFrameSize)
			g.task("TmpltBank", liBankRT, []string{frame}, map[string]float64{"bank_" + s + ".xml": liBankSize})
			g.task("Inspiral", liInspiralRT, []string{frame, "bank_" + s + ".xml"}, map[string]float64{"insp_" + s + ".xml": liInspSize})
			insp = append(insp, "insp_"+s+".xml")
		}
		th := fmt.Sprintf("thinca_%d.xml", gr)
		g.task("Thinca", liThincaRT, insp, map[string]float64{th: liThincaSize})
		var insp2 []string
		for i := range k {
			s := fmt.Sprintf("%d_%d", gr, i)
			g.task("TrigBank", liTrigRT, []string{th}, map[string]float64{"trig_" + s + ".xml": liTrigSize})
			g.task("Inspiral", liInspiralRT, []string{"frame_" + s + ".gwf", "trig_" + s + ".xml"}, map[string]float64{"insp2_" + s + ".xml": liInspSize})
			insp2 = append(insp2, "insp2_"+s+".xml")
		}
		g.task("Thinca", liThincaRT, insp2, map[string]float64{fmt.Sprintf("thinca2_%d.xml", gr): liThincaSize})
	}
}
