package placeholders

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/protocol"
)

// TestBroken: a site's broken placeholders are stored once each (said
// again, the record is the latest word), the latest protocol.MaxBroken of
// it kept; those of a site not stored only for the CLS's own; listed from
// a time on, the latest first; the older ones dropped; a removed site's
// deleted with it.
func TestBroken(t *testing.T) {
	ctx := context.Background()
	t0 := time.UnixMicro(1_000_000_000)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type note struct {
		site     string
		b        protocol.BrokenPlaceholder
		embedded bool
	}
	for _, tc := range []struct {
		name   string
		notes  []note
		remove string
		since  time.Time
		want   string // the listing, by site
	}{
		{"one", []note{{"a", protocol.BrokenPlaceholder{ID: 7, Host: "n7", Why: "stuck", At: at(0)}, false}}, "", t0,
			"a:7@n7 stuck 0s;"},
		{"latest first", []note{
			{"a", protocol.BrokenPlaceholder{ID: 7, Host: "n7", Why: "stuck", At: at(0)}, false},
			{"a", protocol.BrokenPlaceholder{ID: 8, Host: "n8", Why: "root", At: at(time.Minute)}, false},
			{"b", protocol.BrokenPlaceholder{ID: 9, Host: "n9", Why: "x", At: at(time.Second)}, false},
		}, "", t0, "a:8@n8 root 1m0s,7@n7 stuck 0s;b:9@n9 x 1s;"},
		{"said again", []note{
			{"a", protocol.BrokenPlaceholder{ID: 7, Host: "n7", Why: "stuck", At: at(0)}, false},
			{"a", protocol.BrokenPlaceholder{ID: 7, Host: "n7", Why: "again", At: at(time.Hour)}, false},
		}, "", t0, "a:7@n7 again 1h0m0s;"},
		{"site not stored", []note{{"gone", protocol.BrokenPlaceholder{ID: 7, Why: "x", At: at(0)}, false}}, "", t0, ""},
		{"the CLS's own", []note{{"local", protocol.BrokenPlaceholder{ID: 7, Why: "x", At: at(0)}, true}}, "", t0, "local:7@ x 0s;"},
		{"older not listed", []note{
			{"a", protocol.BrokenPlaceholder{ID: 7, Why: "old", At: at(0)}, false},
			{"a", protocol.BrokenPlaceholder{ID: 8, Why: "new", At: at(time.Hour)}, false},
		}, "", at(time.Minute), "a:8@ new 1h0m0s;"},
		{"a day older dropped as one is noted", []note{
			{"a", protocol.BrokenPlaceholder{ID: 7, Why: "old", At: at(0)}, false},
			{"b", protocol.BrokenPlaceholder{ID: 8, Why: "new", At: at(protocol.BrokenKept + time.Second)}, false},
		}, "", t0, "b:8@ new 24h0m1s;"},
		{"removed site", []note{
			{"a", protocol.BrokenPlaceholder{ID: 7, Why: "x", At: at(0)}, false},
			{"b", protocol.BrokenPlaceholder{ID: 8, Why: "y", At: at(0)}, false},
		}, "a", t0, "b:8@ y 0s;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, _ := newDB(t)
			for _, name := range []string{"a", "b"} {
				if err := AddSite(ctx, db, protocol.SiteSpec{Name: name}, t0); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range tc.notes {
				if err := NoteBroken(ctx, db, n.site, n.b, n.embedded); err != nil {
					t.Fatal(err)
				}
			}
			if tc.remove != "" {
				if err := RemoveSite(ctx, db, tc.remove); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Broken(ctx, db, tc.since)
			if err != nil {
				t.Fatal(err)
			}
			if s := brokenString(got, t0); s != tc.want {
				t.Errorf("listed %q, want %q", s, tc.want)
			}
		})
	}
}

// TestBrokenBounds: a site keeps its latest protocol.MaxBroken, and a
// closed database's failure is a batchfail.Store.
func TestBrokenBounds(t *testing.T) {
	ctx := context.Background()
	db, _ := newDB(t)
	t0 := time.UnixMicro(1_000_000_000)
	if err := AddSite(ctx, db, protocol.SiteSpec{Name: "a"}, t0); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= protocol.MaxBroken+2; id++ {
		if err := NoteBroken(ctx, db, "a", protocol.BrokenPlaceholder{ID: id, Why: "x", At: t0.Add(time.Duration(id) * time.Second)}, false); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Broken(ctx, db, t0)
	if err != nil {
		t.Fatal(err)
	}
	if b := got["a"]; len(b) != protocol.MaxBroken || b[0].ID != protocol.MaxBroken+2 || b[len(b)-1].ID != 3 {
		t.Fatalf("kept %+v; want the latest %d, %d first", b, protocol.MaxBroken, protocol.MaxBroken+2)
	}
	db.Close()
	if err := NoteBroken(ctx, db, "a", protocol.BrokenPlaceholder{ID: 99, At: t0}, false); !batchfail.IsStore(err) {
		t.Errorf("NoteBroken on a closed database: %v, want a batchfail.Store", err)
	}
}

// brokenString is a listing by site: "site:id@host why since-t0,...;".
func brokenString(m map[string][]protocol.BrokenPlaceholder, t0 time.Time) string {
	var s string
	for _, site := range []string{"a", "b", "gone", "local"} {
		if len(m[site]) == 0 {
			continue
		}
		s += site + ":"
		for i, b := range m[site] {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf("%d@%s %s %v", b.ID, b.Host, b.Why, b.At.Sub(t0))
		}
		s += ";"
	}
	return s
}
