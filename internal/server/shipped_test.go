package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/protocol"
)

// TestShipStreamNamesBounded: however many stream-file names a
// placeholder ships, the server remembers a bounded number of them, and
// none once its connection closes.
func TestShipStreamNamesBounded(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t), OutputDir: t.TempDir()}
	a, ra := shippingPlaceholder(t, srv)
	var rep protocol.StreamPieceReply
	for seq := range 3 * maxShippedPerPlaceholder {
		a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: protocol.StreamFileName(ra.ID, seq), Data: []byte("MQSTRM01")}, &rep)
		if n := srv.shipped.size(); n > maxShippedPerPlaceholder {
			t.Fatalf("after %d names the server remembers %d, more than %d", seq+1, n, maxShippedPerPlaceholder)
		}
	}
	a.c.Close()
	select {
	case <-a.served:
	case <-time.After(patience):
		t.Fatal("the connection did not close")
	}
	if n := srv.shipped.size(); n != 0 {
		t.Errorf("%d names remembered after the placeholder's connection closed", n)
	}
}

// TestShipStreamForgottenName: a copy whose name the server forgot in the
// middle of a large chunk is checked again at the next piece: the
// half-chunk is cut, the piece refused as at a wrong offset, and the
// placeholder, resuming from the size answered, makes the copy whole.
func TestShipStreamForgottenName(t *testing.T) {
	t.Parallel()
	exts, whole := siteStreamFile(t, "job %d "+strings.Repeat("x", 1000)+"\n", 2)
	out := t.TempDir()
	srv := &Server{Store: newStore(t), OutputDir: out}
	a, ra := shippingPlaceholder(t, srv)
	name := protocol.StreamFileName(ra.ID, 0)
	half := exts[0].Last + 100 // in the middle of the second chunk
	var rep protocol.StreamPieceReply
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Data: whole[:half]}, &rep)
	if rep.Size != half {
		t.Fatalf("size after the first piece: %d, want %d", rep.Size, half)
	}
	srv.shipped.forgetAll(ra.ID)
	a.fails(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: half, Data: whole[half:]}, protocol.CodeBadState)
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name}, &rep)
	if rep.Size != exts[0].Last {
		t.Fatalf("size after the check: %d, want the first chunk's end %d", rep.Size, exts[0].Last)
	}
	a.do(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Offset: rep.Size, Data: whole[rep.Size:]}, &rep)
	cp := filepath.Join(out, protocol.StreamDir, name)
	if got, err := os.ReadFile(cp); err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("copy after resuming: %d bytes (%v), want %d", len(got), err, len(whole))
	}
	for i, ext := range exts {
		var buf bytes.Buffer
		if _, err := outstream.ReadFile(&buf, cp, outstream.Tag{Job: int64(i + 1), Attempt: 1, Stream: outstream.Stdout}, ext); err != nil || !strings.HasPrefix(buf.String(), fmt.Sprintf("job %d ", i+1)) {
			t.Errorf("job %d from the copy: %.20q, %v", i+1, buf.String(), err)
		}
	}
}

// TestShipStreamFilesBounded: a placeholder's stream files numbered past
// protocol.MaxStreamFiles are refused (forbidden, which the agent takes
// as final for the file), none is made however many it sends, and the
// refusal is logged once for the placeholder; the last file it may ship
// is copied.
func TestShipStreamFilesBounded(t *testing.T) {
	t.Parallel()
	var buf syncBuf
	srv := &Server{Store: newStore(t), OutputDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(&buf, nil))}
	a, ra := shippingPlaceholder(t, srv)
	piece := func(seq int) protocol.StreamPiece {
		return protocol.StreamPiece{Placeholder: ra.ID, File: protocol.StreamFileName(ra.ID, seq), Data: []byte("MQSTRM01")}
	}
	var rep protocol.StreamPieceReply
	a.do(protocol.OpOutputShip.Name, piece(protocol.MaxStreamFiles-1), &rep)
	for seq := protocol.MaxStreamFiles; seq < protocol.MaxStreamFiles+100; seq++ {
		if e := a.fails(protocol.OpOutputShip.Name, piece(seq), protocol.CodeForbidden); !strings.Contains(e.Msg, "stream files 0 to") {
			t.Fatalf("refusal %q does not say why", e.Msg)
		}
	}
	copies, err := filepath.Glob(filepath.Join(srv.OutputDir, protocol.StreamDir, "*.mqs"))
	if err != nil || len(copies) != 1 || filepath.Base(copies[0]) != protocol.StreamFileName(ra.ID, protocol.MaxStreamFiles-1) {
		t.Errorf("copies %v (%v), want only the last file allowed", copies, err)
	}
	srv.FlushLog()
	if n := strings.Count(buf.String(), "shipped more stream files"); n != 1 {
		t.Errorf("logged the refusal %d times, want once:\n%s", n, buf.String())
	}
}
