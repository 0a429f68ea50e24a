package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/protocol"
)

// TestShipStream: a remote placeholder's pieces land at the end of the
// CLS's copy of its own stream file; a bad name, another placeholder's
// file, a wrong offset, an oversize piece, a local placeholder's file and
// a piece past the output reserve are refused and write nothing, and the
// CLS answers the copy's size after each.
func TestShipStream(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	srv := &Server{Store: newStore(t), OutputDir: out}
	a, ra := shippingPlaceholder(t, srv)
	b := connect(t, srv, protocol.RolePlaceholder)
	b.hello("")
	var rb protocol.RegisterReply
	b.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h2", Slots: 1, OutDir: "/scratch/out2"}, &rb)
	local := connect(t, srv, protocol.RolePlaceholder)
	local.hello("")
	var rl protocol.RegisterReply
	local.do(protocol.OpRegister.Name, protocol.Register{Site: "local", Host: "h", Slots: 1, OutDir: out}, &rl)

	name := protocol.StreamFileName(ra.ID, 0)
	copyPath := filepath.Join(out, protocol.StreamDir, name)
	first := []byte("MQSTRM01 and the first chunks")
	var rep protocol.StreamPieceReply
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: 0, Data: first}, &rep)
	if rep.Size != int64(len(first)) {
		t.Fatalf("size after the first piece: %d, want %d", rep.Size, len(first))
	}
	second := []byte(" and more")
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: rep.Size, Data: second}, &rep)
	want := append(append([]byte(nil), first...), second...)
	if rep.Size != int64(len(want)) {
		t.Fatalf("size after the second piece: %d, want %d", rep.Size, len(want))
	}

	for _, tc := range []struct {
		name string
		p    *peer
		body protocol.StreamPiece
		code string
		msg  string
	}{
		{"path elements", a, protocol.StreamPiece{Placeholder: ra.ID, File: "../" + name, Offset: int64(len(want)), Data: []byte("x")}, protocol.CodeBadRequest, "not a stream file name"},
		{"another spelling", a, protocol.StreamPiece{Placeholder: ra.ID, File: "0" + name, Offset: 0, Data: []byte("x")}, protocol.CodeBadRequest, "not a stream file name"},
		{"long name", a, protocol.StreamPiece{Placeholder: ra.ID, File: strings.Repeat("1", 100) + "-0.mqs", Data: []byte("x")}, protocol.CodeBadRequest, "not a stream file name"},
		{"other placeholder's file", b, protocol.StreamPiece{Placeholder: rb.ID, File: name, Offset: int64(len(want)), Data: []byte("x")}, protocol.CodeForbidden, "placeholder"},
		{"speaking for another", b, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: int64(len(want)), Data: []byte("x")}, protocol.CodeForbidden, "did not register on this connection"},
		{"offset before the end", a, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: 3, Data: []byte("x")}, protocol.CodeBadState, "copy is"},
		{"offset past the end", a, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: int64(len(want)) + 1, Data: []byte("x")}, protocol.CodeBadState, "copy is"},
		{"negative offset", a, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: -1, Data: []byte("x")}, protocol.CodeBadRequest, "offset"},
		{"oversize", a, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: int64(len(want)), Data: make([]byte, protocol.MaxStreamPiece+1)}, protocol.CodeBadRequest, "more than"},
		{"past the copy's bound", a, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: protocol.MaxStreamCopy, Data: []byte("x")}, protocol.CodeBadRequest, "outside"},
		{"local placeholder", local, protocol.StreamPiece{Placeholder: rl.ID, File: protocol.StreamFileName(rl.ID, 0), Data: []byte("x")}, protocol.CodeBadRequest, "nothing to ship"},
	} {
		e := tc.p.fails(protocol.OpOutputShip.Name, tc.body, tc.code)
		if !strings.Contains(e.Msg, tc.msg) {
			t.Errorf("%s: error %q does not say %q", tc.name, e.Msg, tc.msg)
		}
		got, err := os.ReadFile(copyPath)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the copy is %q (%v), want %q", tc.name, got, err, want)
		}
	}
	for _, f := range []string{protocol.StreamFileName(rb.ID, 0), protocol.StreamFileName(rl.ID, 0)} {
		if _, err := os.Stat(filepath.Join(out, protocol.StreamDir, f)); err == nil {
			t.Errorf("a refused piece made %s", f)
		}
	}

	// Asked its size (a piece without data), the CLS answers it.
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name}, &rep)
	if rep.Size != int64(len(want)) {
		t.Fatalf("size asked: %d, want %d", rep.Size, len(want))
	}
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: protocol.StreamFileName(ra.ID, 1)}, &rep)
	if rep.Size != 0 {
		t.Fatalf("size of a copy never shipped: %d", rep.Size)
	}

	// Past the output reserve: refused, nothing written, and the CLS
	// goes on answering.
	srv.OutputReserve = 1 << 62
	e := a.fails(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: int64(len(want)), Data: []byte("x")}, protocol.CodeTooLarge)
	if !strings.Contains(e.Msg, "--output-reserve") {
		t.Errorf("disk full: %q does not name the setting", e.Msg)
	}
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name}, &rep)
	if got, _ := os.ReadFile(copyPath); rep.Size != int64(len(want)) || !bytes.Equal(got, want) {
		t.Fatalf("after a refusal for room: size %d, copy %q", rep.Size, got)
	}
	fresh := protocol.StreamFileName(ra.ID, 2)
	a.fails(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: fresh, Data: []byte("MQSTRM01")}, protocol.CodeTooLarge)
	if _, err := os.Stat(filepath.Join(out, protocol.StreamDir, fresh)); err == nil {
		t.Errorf("a piece refused for room made the copy %s", fresh)
	}
}

// TestShipStreamTornCopy: a copy left torn by a CLS that stopped mid-piece
// is cut to its last whole chunk at the first piece since the start, its
// size answered, and the rest shipped again from there reads whole.
func TestShipStreamTornCopy(t *testing.T) {
	t.Parallel()
	exts, whole := siteStreamFile(t, "job %d\n", 3)
	out := t.TempDir()
	a, ra := shippingPlaceholder(t, &Server{Store: newStore(t), OutputDir: out})
	name := protocol.StreamFileName(ra.ID, 0)
	cp := filepath.Join(out, protocol.StreamDir, name)
	if err := os.MkdirAll(filepath.Dir(cp), 0o700); err != nil {
		t.Fatal(err)
	}
	// The CLS stopped in the middle of the last chunk.
	cut := exts[2].Last + 10
	if err := os.WriteFile(cp, whole[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	var rep protocol.StreamPieceReply
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name}, &rep)
	if rep.Size != exts[2].Last {
		t.Fatalf("torn copy's size %d, want it cut to the last whole chunk's end %d", rep.Size, exts[2].Last)
	}
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: rep.Size, Data: whole[rep.Size:]}, &rep)
	got, err := os.ReadFile(cp)
	if err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("copy after the rest: %d bytes (%v), want %d", len(got), err, len(whole))
	}
	var buf bytes.Buffer
	if _, err := outstream.ReadFile(&buf, cp, outstream.Tag{Job: 3, Attempt: 1, Stream: outstream.Stdout}, exts[2]); err != nil || buf.String() != "job 3\n" {
		t.Errorf("job 3 from the copy: %q, %v", buf.String(), err)
	}
}

// TestReadStreamed: output.read of a streamed output serves the window
// asked for, across chunks, with its size and EOF, and refuses a torn one.
func TestReadStreamed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "1-0.mqs")
	w, err := outstream.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789"), 20000) // 200,000 bytes: several chunks
	o := w.Output(outstream.Tag{Job: 7, Attempt: 2, Stream: outstream.Stderr}, 0)
	o.Write(data)
	ext, err := o.Close()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	se := &protocol.StreamExtent{Path: path, Attempt: 2, Last: ext.Last, Bytes: ext.Bytes}
	for _, tc := range []struct {
		off  int64
		max  int
		want []byte
		eof  bool
	}{
		{0, 100, data[:100], false},
		{65530, 20, data[65530:65550], false}, // across a chunk boundary
		{199990, 100, data[199990:], true},
		{0, len(data), data, true},
		{int64(len(data)), 10, nil, true},
	} {
		got, err := readStreamed(protocol.OutputData{Attempt: 2}, protocol.OutputRead{ID: 7, Stream: "stderr", Offset: tc.off}, se, tc.max)
		if err != nil || !bytes.Equal(got.Data, tc.want) || got.EOF != tc.eof || got.Size != int64(len(data)) {
			t.Errorf("offset %d max %d: %d bytes, eof %v, size %d, %v; want %d bytes, eof %v", tc.off, tc.max, len(got.Data), got.EOF, got.Size, err, len(tc.want), tc.eof)
		}
	}
	torn := *se
	torn.Bytes++
	if _, err := readStreamed(protocol.OutputData{}, protocol.OutputRead{ID: 7, Stream: "stderr"}, &torn, 10); err == nil {
		t.Error("an extent not as the chunks say was served")
	}
}

// TestShipStreamSynced: under --sync full (SyncStreams) a piece is synced
// into the copy before it is answered, and pieces go on from its size.
func TestShipStreamSynced(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	srv := &Server{Store: newStore(t), OutputDir: out, SyncStreams: true}
	a, ra := shippingPlaceholder(t, srv)
	name := protocol.StreamFileName(ra.ID, 0)
	var rep protocol.StreamPieceReply
	var want []byte
	for _, piece := range []string{"MQSTRM01", "more", "and more"} {
		a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: rep.Size, Data: []byte(piece)}, &rep)
		want = append(want, piece...)
	}
	got, err := os.ReadFile(filepath.Join(out, protocol.StreamDir, name))
	if err != nil || !bytes.Equal(got, want) || rep.Size != int64(len(want)) {
		t.Fatalf("copy %q (%v), size %d; want %q", got, err, rep.Size, want)
	}
}

// TestRegisterOutputMode: a placeholder hears at registration how to keep
// jobs' output: its site's mode when the site has one (cls site add
// --output), else the CLS's (cls serve --output).
func TestRegisterOutputMode(t *testing.T) {
	t.Parallel()
	site := func(name string) (files, ok bool) {
		switch name {
		case "f":
			return true, true
		case "s":
			return false, true
		}
		return false, false
	}
	for _, tc := range []struct {
		clsFiles bool
		site     string
		want     bool
	}{
		{false, "f", true},
		{false, "s", false},
		{false, "other", false},
		{true, "f", true},
		{true, "s", false},
		{true, "other", true},
	} {
		srv := &Server{Store: newStore(t), OutputDir: t.TempDir(), OutputFiles: tc.clsFiles, SiteOutputFiles: site}
		p := connect(t, srv, protocol.RolePlaceholder)
		p.hello("")
		var r protocol.RegisterReply
		p.do(protocol.OpRegister.Name, protocol.Register{Site: tc.site, Host: "h", Slots: 1, OutDir: "/scratch/out"}, &r)
		if r.OutputFiles != tc.want {
			t.Errorf("cls files %v, site %s: OutputFiles %v, want %v", tc.clsFiles, tc.site, r.OutputFiles, tc.want)
		}
	}
}

// TestShipStreamOwnFile: an agent on the CLS's host whose --out is the
// CLS's own output directory (cls agent --cls ... without --out) ships
// pieces of the very file the CLS reads: bytes already there are taken as
// shipped, so its jobs' output is not reported lost; bytes that differ
// are refused, and nothing is appended.
func TestShipStreamOwnFile(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	srv := &Server{Store: newStore(t), OutputDir: out}
	a := connect(t, srv, protocol.RolePlaceholder)
	a.hello("")
	var ra protocol.RegisterReply
	a.do(protocol.OpRegister.Name, protocol.Register{Site: "here", Host: "h", Slots: 1, OutDir: out + "/"}, &ra)
	name := protocol.StreamFileName(ra.ID, 0)
	path := filepath.Join(out, protocol.StreamDir, name)
	whole := []byte("MQSTRM01 and its chunks")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	var rep protocol.StreamPieceReply
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name}, &rep)
	if rep.Size != int64(len(whole)) {
		t.Fatalf("size asked: %d, want %d", rep.Size, len(whole))
	}
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: 0, Data: whole[:8]}, &rep)
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: 8, Data: whole[8:]}, &rep)
	if rep.Size != int64(len(whole)) {
		t.Fatalf("size after its own bytes: %d, want %d", rep.Size, len(whole))
	}
	for _, p := range []protocol.StreamPiece{
		{Placeholder: ra.ID, File: name, Offset: 8, Data: []byte("other")},
		{Placeholder: ra.ID, File: name, Offset: int64(len(whole)), Data: []byte("past")},
		{Placeholder: ra.ID, File: protocol.StreamFileName(ra.ID, 1), Data: []byte("MQSTRM01")},
	} {
		if e := a.fails(protocol.OpOutputShip.Name, p, protocol.CodeBadRequest); !strings.Contains(e.Msg, "nothing to ship") {
			t.Errorf("piece %q at %d of %s: %q", p.Data, p.Offset, p.File, e.Msg)
		}
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("the file is %q (%v), want %q untouched", got, err, whole)
	}
}

// siteStreamFile writes a placeholder's stream file of n jobs' stdout,
// job i's line format (with i), and returns its extents and bytes.
func siteStreamFile(t *testing.T, format string, n int) ([]outstream.Extent, []byte) {
	t.Helper()
	site := filepath.Join(t.TempDir(), "site.mqs")
	w, err := outstream.Create(site)
	if err != nil {
		t.Fatal(err)
	}
	var exts []outstream.Extent
	for i := range n {
		o := w.Output(outstream.Tag{Job: int64(i + 1), Attempt: 1, Stream: outstream.Stdout}, 0)
		fmt.Fprintf(o, format, i+1)
		ext, err := o.Close()
		if err != nil {
			t.Fatal(err)
		}
		exts = append(exts, ext)
	}
	w.Close()
	whole, err := os.ReadFile(site)
	if err != nil {
		t.Fatal(err)
	}
	return exts, whole
}

// shippingPlaceholder is a placeholder registered with srv, to ship
// stream files to its output directory.
func shippingPlaceholder(t *testing.T, srv *Server) (*peer, protocol.RegisterReply) {
	t.Helper()
	a := connect(t, srv, protocol.RolePlaceholder)
	a.hello("")
	var ra protocol.RegisterReply
	a.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: "/scratch/out"}, &ra)
	return a, ra
}
