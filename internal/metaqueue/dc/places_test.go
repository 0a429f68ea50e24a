package dc

import (
	"fmt"
	"testing"

	"github.com/mq-hpc/mq/internal/policy"
)

// TestPlacesForgotten: placeholders registering under endless site names,
// each gone after, leave the places of those still there and of files
// only; a place two placeholders share stays until both are gone, and no
// number is given twice.
func TestPlacesForgotten(t *testing.T) {
	d := newState()
	given := map[policy.Site]bool{}
	for ph := int64(1); ph <= 10_000; ph++ {
		at := d.SetPlaceholder(ph, fmt.Sprintf("name%d", ph), "h")
		if given[at] {
			t.Fatalf("place number %d given twice", at)
		}
		given[at] = true
		d.PlaceholderGone(ph)
	}
	a := d.SetPlaceholder(20_001, "a", "h")
	if d.SetPlaceholder(20_002, "a", "h2") != a {
		t.Fatal("two placeholders of a site not node-local have two places")
	}
	file := d.SetPlaceholder(20_003, "files", "h")
	d.Locate("/data/x", Loc{At: file, Size: 1})
	d.PlaceholderGone(20_003)
	d.PlaceholderGone(20_001)
	if n := d.Places(); n != 2 {
		t.Errorf("%d places numbered, want 2 (a, files)", n)
	}
	if got := d.SiteAt(a); got.Site != "a" {
		t.Errorf("SiteAt(a) = %v", got)
	}
	if got := d.SiteAt(file); got.Site != "files" {
		t.Errorf("SiteAt(file) = %v", got)
	}
	// Registering again where it was moves a placeholder's count along.
	d.SetPlaceholder(20_002, "b", "h")
	if _, ok := d.placeID[Place{"a", ""}]; ok {
		t.Errorf("place a kept after its last placeholder moved to b")
	}
	d.PlaceholderGone(20_002)
	if n := d.Places(); n != 1 {
		t.Errorf("%d places numbered, want 1 (files)", n)
	}
}
