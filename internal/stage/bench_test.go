package stage

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkMoveBig moves a 256 MiB file made on the fly to an SFTP place
// (pkg/sftp's server in-process, over a socket pair): the pipelined
// writes and the hashing, without a network.
func BenchmarkMoveBig(b *testing.B) {
	const size = 256 << 20
	m := &Mover{Places: places{
		"gen":  generated{Size: size},
		"sftp": SFTP{Client: sftpClient(b), Root: b.TempDir()},
	}.get}
	b.SetBytes(size)
	for b.Loop() {
		if res := m.Move(context.Background(), Transfer{Path: "/big", From: "gen", To: "sftp", Size: size}); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

// BenchmarkMoveSmall moves 1,000 files of 10 KiB from a Dir to an SFTP
// place, 32 at a time on the one connection.
func BenchmarkMoveSmall(b *testing.B) {
	const n, size = 1000, 10 << 10
	src := b.TempDir()
	ts := make([]Transfer, n)
	for i := range ts {
		name := fmt.Sprintf("/small/d%02d/f%04d", i%50, i)
		writeFile(b, src+name, randomBytes(size, uint64(i)))
		ts[i] = Transfer{Path: name, From: "dir", To: "sftp", Size: size}
	}
	m := &Mover{Places: places{
		"dir":  Dir{Root: src},
		"sftp": SFTP{Client: sftpClient(b), Root: b.TempDir()},
	}.get}
	b.SetBytes(n * size)
	for b.Loop() {
		for _, res := range m.MoveAll(context.Background(), ts, 32) {
			if res.Err != nil {
				b.Fatal(res.Err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N*n)*1e3, "ms/file")
}
