package spool

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestClockOffset: the offset an agent measured between the CLS's clock
// and its own travels in the spool, and the CLS moves the spooled
// reports' times by it past protocol.MaxClockSkew, as it moves live
// reports'. A file without one (an agent that never heard the CLS's
// clock, or one of before) reads as it was written; an offset past
// MaxClockOffset is ignored, said in the log, and the reports applied.
func TestClockOffset(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old := `{"mq_spool":1,"placeholder":7,"reports":[{"id":1,"attempt":1,"started":"2026-01-02T03:04:05Z","finished":"2026-01-02T04:04:05Z"}]%s}`
	for _, tc := range []struct {
		name string
		// offset is written by Write unless data is the file itself.
		offset time.Duration
		data   string
		move   time.Duration
		logged string
	}{
		{name: "none said", offset: 0},
		{name: "CLS three hours ahead", offset: 3 * time.Hour, move: 3 * time.Hour, logged: "moved onto the CLS's clock"},
		{name: "CLS a day behind", offset: -26 * time.Hour, move: -26 * time.Hour, logged: "moved onto the CLS's clock"},
		{name: "within the skew", offset: protocol.MaxClockSkew},
		{name: "a year ahead", offset: MaxClockOffset, move: MaxClockOffset, logged: "moved onto the CLS's clock"},
		{name: "old format", data: fmt.Sprintf(old, "")},
		{name: "absurd", data: fmt.Sprintf(old, fmt.Sprintf(`,"clock_offset_ms":%d`, (MaxClockOffset+time.Millisecond).Milliseconds())), logged: "not believable"},
		{name: "absurd behind", data: fmt.Sprintf(old, fmt.Sprintf(`,"clock_offset_ms":%d`, int64(math.MinInt64))), logged: "not believable"},
		{name: "absurd ahead", data: fmt.Sprintf(old, fmt.Sprintf(`,"clock_offset_ms":%d`, int64(math.MaxInt64))), logged: "not believable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), Dir)
			if tc.data == "" {
				if _, err := Write(dir, 7, tc.offset, reports(1)); err != nil {
					t.Fatal(err)
				}
				data, err := os.ReadFile(filepath.Join(dir, names(t, dir)[0]))
				if err != nil {
					t.Fatal(err)
				}
				if said := strings.Contains(string(data), `"clock_offset_ms"`); said != (tc.offset != 0) {
					t.Errorf("offset %v: written %s", tc.offset, data)
				}
			} else {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := writeFile(dir, fileName(7), []byte(tc.data)); err != nil {
					t.Fatal(err)
				}
			}
			got, n, logged, err := deliver(t, dir, nil)
			if err != nil || n != 1 || len(got) != 1 {
				t.Fatalf("Deliver: %d, %v, log %q", n, err, logged)
			}
			r := got[0].Reports[0]
			if want := t0.Add(tc.move); !r.Started.Equal(want) || r.Finished.Sub(r.Started) != time.Hour {
				t.Errorf("report started %v, finished %v; want started %v, an hour long", r.Started, r.Finished, want)
			}
			if tc.logged == "" && logged != "" || !strings.Contains(logged, tc.logged) {
				t.Errorf("logged %q, want %q", logged, tc.logged)
			}
		})
	}
}
