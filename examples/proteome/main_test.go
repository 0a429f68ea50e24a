package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/driver"
)

// TestProteomeRanges: drawn values stay in thesis table 6.1's ranges,
// scaled, and the same seed gives the same proteome.
func TestProteomeRanges(t *testing.T) {
	ps := proteome(500, 7, 0.01)
	for i, p := range ps {
		if p.seq < 250 || p.seq > 850 || p.hom < 5000 || p.hom > 85000 ||
			p.blast < 20*time.Millisecond || p.blast > 80*time.Millisecond ||
			p.parse < 5*time.Millisecond || p.parse > 7*time.Millisecond {
			t.Fatalf("protein %d out of range: %+v", i, p)
		}
	}
	if proteome(500, 7, 0.01)[123] != ps[123] {
		t.Error("same seed, different proteome")
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--placeholders", "0"},
		{"--batching", "some"},
		{"--scale", "-1"},
		{"--proteins", "1,x"},
		{"--sync", "maybe"},
		{"extra"},
	} {
		err := run(context.Background(), args)
		if _, ok := err.(usageError); !ok {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestWorkflowLocal runs a small workflow in local mode with every kind of
// batching: every job succeeds and the phases are measured.
func TestWorkflowLocal(t *testing.T) {
	for _, b := range []string{"none", "hetero", "4"} {
		dir := t.TempDir()
		d, err := driver.New(driver.Config{Dir: dir, Consumers: 4, GroupTimeout: 10 * time.Millisecond, Local: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		phs, err := workflow(context.Background(), d, proteome(10, 1, 0.001), b, dir)
		d.Stop(context.Background())
		if err != nil {
			t.Fatalf("batching %s: %v", b, err)
		}
		var names []string
		for _, ph := range phs {
			names = append(names, ph.Phase)
			if ph.Makespan <= 0 || ph.Nominal <= 0 {
				t.Errorf("batching %s: %+v", b, ph)
			}
		}
		want := "blast parse combined"
		if b == "hetero" {
			want = "combined"
		}
		if strings.Join(names, " ") != want {
			t.Errorf("batching %s: phases %v", b, names)
		}
	}
}
