package clscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// runCls runs a cls command against canned replies, in directory /home/u.
func runCls(replies map[string]clitest.Reply, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getwd: func() (string, error) { return "/home/u", nil }, Dial: clitest.Dial(replies)}
	code = mqcli.Run(context.Background(), Cls(env), append([]string{"cls"}, args...))
	return out.String(), errOut.String(), code
}

// cls files list pages through the catalog until the CLS says no more,
// asking each page after the last path it got, and prints one table.
func TestFilesListPages(t *testing.T) {
	size := int64(2048)
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	pages := []protocol.FilesReply{
		{Files: []protocol.CatalogFile{
			{Path: "/home/u/seqs/a.fa", Size: &size, SHA256: sum, Replicas: []protocol.Replica{{Site: "local", Host: "cls"}, {Site: "sge"}}},
			{Path: "/home/u/seqs/b.fa", Replicas: []protocol.Replica{}},
		}, More: true},
		{Files: []protocol.CatalogFile{{Path: "/home/u/seqs/c.fa", Size: &size, Replicas: []protocol.Replica{{Site: "slurm"}}}}},
	}
	var asked []protocol.FilesQuery
	replies := map[string]clitest.Reply{protocol.OpFilesList.Name: {Bodies: []any{pages[0], pages[1]}, Seen: func(b json.RawMessage) {
		var q protocol.FilesQuery
		json.Unmarshal(b, &q)
		asked = append(asked, q)
	}}}
	var out, errOut bytes.Buffer
	env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getwd: func() (string, error) { return "/home/u", nil }, Dial: clitest.Dial(replies)}
	if code := mqcli.Run(context.Background(), Cls(env), []string{"cls", "files", "list", "seqs/"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := []protocol.FilesQuery{{Prefix: "/home/u/seqs/"}, {Prefix: "/home/u/seqs/", After: "/home/u/seqs/b.fa"}}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("asked %+v, want %+v", asked, want)
	}
	// Columns are aligned per page (memory stays bounded), as mqstat's are.
	wantOut := `PATH               SIZE   SHA256        REPLICAS
/home/u/seqs/a.fa  2 KiB  0123456789ab  local:cls, sge
/home/u/seqs/b.fa  -      -             none
/home/u/seqs/c.fa  2 KiB  -  slurm
`
	if out.String() != wantOut {
		t.Errorf("cls files list:\n%s\nwant:\n%s", out.String(), wantOut)
	}
}

// A CLS that says "more" without moving on is an error, not a loop.
func TestFilesListStuck(t *testing.T) {
	stuck := protocol.FilesReply{Files: []protocol.CatalogFile{{Path: "/a"}}, More: true}
	calls := 0
	replies := map[string]clitest.Reply{protocol.OpFilesList.Name: {Body: stuck, Seen: func(json.RawMessage) { calls++ }}}
	_, errOut, code := runCls(replies, "files", "list")
	if code != 1 || !strings.Contains(errOut, "do not advance") || calls != 2 {
		t.Errorf("exit %d after %d pages, stderr %q; want exit 1 after 2", code, calls, errOut)
	}
}

// Each command sends what its command line says, with relative paths
// resolved against the current directory.
func TestFilesRequests(t *testing.T) {
	xfer := protocol.TransferInfo{Path: "/home/u/out/r.tsv", From: "sge", To: "local", Bytes: 3 << 20, Seconds: 2, Started: "2026-01-01T00:00:00Z"}
	file := protocol.CatalogFile{Path: "/data/x", Replicas: []protocol.Replica{{Site: "sge"}}}
	for _, tc := range []struct {
		args     []string
		op, sent string
		reply    any
		out      string
	}{
		{[]string{"files", "get", "out/r.tsv"}, protocol.OpFilesGet.Name, `{"path":"/home/u/out/r.tsv"}`, xfer,
			"copied /home/u/out/r.tsv to /home/u/out/r.tsv: sge -> local, 3 MiB in 2 s (1.5 MiB/s)\n"},
		{[]string{"files", "get", "--site", "sge", "/home/u/out/r.tsv", "back/r.tsv"}, protocol.OpFilesGet.Name,
			`{"path":"/home/u/out/r.tsv","site":"sge","dest":"/home/u/back/r.tsv"}`, xfer, "to /home/u/back/r.tsv: "},
		{[]string{"files", "get", "out/r.tsv", "/tmp/r", "--site", "sge"}, protocol.OpFilesGet.Name,
			`{"path":"/home/u/out/r.tsv","site":"sge","dest":"/tmp/r"}`, xfer, "to /tmp/r: "},
		{[]string{"files", "add", "/data/x", "--site", "sge"}, protocol.OpFilesAdd.Name, `{"path":"/data/x","site":"sge"}`, file, "/data/x  -     -       sge\n"},
		{[]string{"files", "add", "--site", "local", "--host", "n1", "x"}, protocol.OpFilesAdd.Name, `{"path":"/home/u/x","site":"local","host":"n1"}`, file, "sge"},
		{[]string{"files", "rm", "x"}, protocol.OpFilesRemove.Name, `{"path":"/home/u/x"}`, file, "sge"},
		{[]string{"files", "rm", "/data/x", "--site", "sge", "--force"}, protocol.OpFilesRemove.Name, `{"path":"/data/x","site":"sge","force":true}`, file, "sge"},
	} {
		var sent string
		replies := map[string]clitest.Reply{tc.op: {Body: tc.reply, Seen: func(b json.RawMessage) { sent = string(b) }}}
		out, errOut, code := runCls(replies, tc.args...)
		if code != 0 || sent != tc.sent || !strings.Contains(out, tc.out) {
			t.Errorf("cls %s: exit %d, sent %s, stdout %q, stderr %q\nwant sent %s, stdout with %q", strings.Join(tc.args, " "), code, sent, out, errOut, tc.sent, tc.out)
		}
	}
}

// Usage mistakes are one line, exit 2, and reach no CLS.
func TestFilesUsage(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"files get", "files get takes PATH and an optional DEST"},
		{"files get a b c", "files get takes PATH and an optional DEST"},
		{"files add x", "files add needs --site"},
		{"files add", "files add takes one PATH"},
		{"files rm a b", "files rm takes one PATH"},
		{"files list a b", "files list takes at most one PREFIX"},
		{"files list --site s", "unknown flag --site"},
		{"files rm x --force=maybe", "force"},
	} {
		var out, errOut bytes.Buffer
		dialled := false
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: func() (string, error) { return "/home/u", nil },
			Dial: func(context.Context) (io.ReadWriteCloser, error) {
				dialled = true
				return nil, errors.New("no CLS in this test")
			}}
		code := mqcli.Run(context.Background(), Cls(env), append([]string{"cls"}, strings.Fields(tc.args)...))
		if code != 2 || !strings.Contains(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 || dialled {
			t.Errorf("cls %s: exit %d, stderr %q, dialled %v; want exit 2 and one line with %q", tc.args, code, errOut.String(), dialled, tc.want)
		}
	}
}

// What the CLS sends about files reaches no terminal raw.
func TestFilesEscapePeerText(t *testing.T) {
	h := clitest.Hostile
	file := protocol.CatalogFile{Path: h, SHA256: h, Replicas: []protocol.Replica{{Site: h, Host: h}}}
	replies := map[string]clitest.Reply{
		protocol.OpFilesList.Name:   {Body: protocol.FilesReply{Files: []protocol.CatalogFile{file}}},
		protocol.OpFilesGet.Name:    {Body: protocol.TransferInfo{Path: h, From: h, To: h, Started: h}},
		protocol.OpFilesAdd.Name:    {Body: file},
		protocol.OpFilesRemove.Name: {Err: protocol.Errorf(protocol.CodeNotFound, "%s", h)},
	}
	failing := map[string]clitest.Reply{protocol.OpFilesGet.Name: {Body: protocol.TransferInfo{Path: h, From: h, To: h, Error: h}}}
	for _, tc := range []struct {
		args    string
		replies map[string]clitest.Reply
	}{
		{"files list", replies}, {"files get x", replies}, {"files add x --site s", replies}, {"files rm x", replies}, {"files get x", failing},
	} {
		out, errOut, _ := runCls(tc.replies, strings.Fields(tc.args)...)
		all := out + errOut
		if bad := clitest.Raw(all); bad != "" || !strings.Contains(all, "evil") {
			t.Errorf("cls %s: %q reached the output raw (or nothing shown):\n%s", tc.args, bad, all)
		}
	}
}
