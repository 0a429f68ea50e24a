package catalog

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestKeepAt: a file a plan keeps at a site is asked for there only with a
// stager, when the catalog knows it and it is not there yet, at the
// site's store place.
func TestKeepAt(t *testing.T) {
	for _, tc := range []struct {
		name, path, site string
		stager           bool
		want             []Place // the places asked for
	}{
		{"no stager", "/f", "rooted", false, nil},
		{"unknown file", "/unknown", "rooted", true, nil},
		{"already there", "/f", "nfs", true, nil}, // nfs shares the CLS host's filesystem
		{"to a rooted site", "/f", "rooted", true, []Place{rooted}},
		{"to a site sharing the CLS host's", "/g", "nfs", true, []Place{Shared}},
		{"to a site the CLS does not know", "/g", "elsewhere", true, []Place{Shared}},
	} {
		st := &fakeStager{}
		var c *Catalog
		if tc.stager {
			c = newTest(st)
		} else {
			c = newTest(nil)
		}
		c.files["/f"] = &file{size: 3, reps: []Place{Shared}}
		c.files["/g"] = &file{size: 3, reps: []Place{rooted}}
		if u := c.KeepAt(tc.path, tc.site, 9); u != nil {
			t.Errorf("%s: fails %+v", tc.name, u)
		}
		var got []Place
		for _, r := range st.reqs {
			if r.Path != tc.path || r.Job != 9 {
				t.Errorf("%s: asked %+v", tc.name, r)
			}
			got = append(got, r.To)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: asked for %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRequestsRefuse: a request that refuses does so before it writes
// (the catalog here has no statements and no database) with the code
// the CLS answers.
func TestRequestsRefuse(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	sha := func(c byte) string { return string(slices.Repeat([]byte{c}, protocol.MaxSHA256Bytes)) }
	c := newTest(nil)
	c.files["/in"] = &file{sha: sha('a'), reps: []Place{Shared}}
	c.SetInputs(7, []Input{{Path: "/in", Movable: true}})
	for _, tc := range []struct {
		name string
		do   func() error
		code string
	}{
		{"add: relative path", func() error { _, _, err := c.AddFile(ctx, nil, "in", rooted, 1, "", now); return err }, protocol.CodeBadRequest},
		{"add: no site", func() error { _, _, err := c.AddFile(ctx, nil, "/in", Place{}, 1, "", now); return err }, protocol.CodeBadRequest},
		{"add: bad checksum", func() error { _, _, err := c.AddFile(ctx, nil, "/in", rooted, 1, "xyz", now); return err }, protocol.CodeBadRequest},
		{"add: another file", func() error { _, _, err := c.AddFile(ctx, nil, "/in", rooted, 1, sha('b'), now); return err }, protocol.CodeBadState},
		{"add: no host at a per-host site", func() error { _, _, err := c.AddFile(ctx, nil, "/in", Place{Site: "nodes"}, 1, "", now); return err }, protocol.CodeBadRequest},
		{"remove: unknown file", func() error { _, _, _, err := c.RemoveFile(ctx, nil, "/nope", "", false); return err }, protocol.CodeNotFound},
		{"remove: no replica there", func() error { _, _, _, err := c.RemoveFile(ctx, nil, "/in", "rooted", false); return err }, protocol.CodeNotFound},
		{"remove: the last, read by a live job", func() error { _, _, _, err := c.RemoveFile(ctx, nil, "/in", "", false); return err }, protocol.CodeBadState},
		{"transfer: negative bytes", func() error { return CheckTransfer(protocol.TransferInfo{Bytes: -1}) }, protocol.CodeBadRequest},
		{"transfer: negative seconds", func() error { return CheckTransfer(protocol.TransferInfo{Seconds: -1}) }, protocol.CodeBadRequest},
		{"transfer: fine", func() error { return CheckTransfer(protocol.TransferInfo{Bytes: 1, Seconds: 1}) }, ""},
	} {
		if got := codeOf(tc.do()); got != tc.code {
			t.Errorf("%s: code %q, want %q", tc.name, got, tc.code)
		}
	}
	if f := c.files["/in"]; len(f.reps) != 1 || f.sha != sha('a') {
		t.Errorf("a refused request changed the file: %+v", f)
	}
}

// TestDropMissingNothing: with nothing of the catalog's to drop, the job
// is not handed back and nothing is written (no database here).
func TestDropMissingNothing(t *testing.T) {
	c := newTest(&fakeStager{})
	c.files["/a"] = &file{reps: []Place{rooted}}
	c.SetInputs(1, []Input{{Path: "/a", Movable: true}})
	for _, tc := range []struct {
		name    string
		to      Place
		missing []string
	}{
		{"not held there", n1, []string{"/a"}},
		{"not its input", rooted, []string{"/b"}},
		{"nothing missing", rooted, nil},
	} {
		stale, ch, err := c.DropMissing(context.Background(), nil, 1, tc.to, tc.missing)
		if stale || err != nil || ch.Moved || ch.Gone != nil || ch.Arrived != nil || ch.Fail != nil {
			t.Errorf("%s: %v, %+v, %v", tc.name, stale, ch, err)
		}
	}
}
