package clscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/protocol"
)

// TestSSHExecReadsRegularFilesOnly: a user key's mqsub runs inside the
// CLS, so a file it names is read by the CLS: /dev/stdin (the CLS's own
// stdin), /dev/zero and the like are refused in one line before a byte
// is read; -f - is the session's stdin.
func TestSSHExecReadsRegularFilesOnly(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // sshExec's working directory
	dial := clitest.Dial(nil)     // hello, then every request refused
	dialCLS := func(server.Peer) io.ReadWriteCloser {
		c, err := dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		line string
		code int
		msg  string
	}{
		{"mqsub -f /dev/stdin", mqcli.ExitFailed, `mqsub: cannot read "/dev/stdin": not a regular file (over SSH mq reads only regular files of the CLS host)` + "\n"},
		{"mqsub -f /dev/zero", mqcli.ExitFailed, `mqsub: cannot read "/dev/zero": not a regular file (over SSH mq reads only regular files of the CLS host)` + "\n"},
		{"mqsub --wfformat /dev/zero", mqcli.ExitFailed, `mqsub: cannot read "/dev/zero": not a regular file (over SSH mq reads only regular files of the CLS host)` + "\n"},
		{"mqsub --wfformat /dev/stdin", mqcli.ExitFailed, `mqsub: cannot read "/dev/stdin": not a regular file (over SSH mq reads only regular files of the CLS host)` + "\n"},
		// Read, then refused by this test's CLS, which refuses every request.
		{"mqsub -f -", mqcli.ExitFailed, ""},
	} {
		var out, errOut bytes.Buffer
		done := make(chan int, 1)
		stdin := strings.NewReader(`{"target":"t","command":"true"}` + "\n")
		go func() {
			done <- sshExec(dialCLS)(context.Background(), server.Peer{MaxRole: protocol.RoleUser}, strings.Fields(tc.line), stdin, &out, &errOut)
		}()
		var code int
		select {
		case code = <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s over SSH: still running after 60s", tc.line)
		}
		if code != tc.code || tc.msg != "" && errOut.String() != tc.msg {
			t.Errorf("%s over SSH: exit %d, stderr %q; want exit %d, %q", tc.line, code, errOut.String(), tc.code, tc.msg)
		}
		if tc.msg == "" && (strings.Contains(errOut.String(), "cannot read") || stdin.Len() > 0) {
			t.Errorf("%s over SSH: stderr %q, %d bytes of stdin unread; want the session's stdin read", tc.line, errOut.String(), stdin.Len())
		}
	}
}

// TestKeyAddReadsBounded: cls key add reads at most what a public key
// may take, from a file, a device or stdin alike, and says so when there
// is more.
func TestKeyAddReadsBounded(t *testing.T) {
	t.Setenv("MQ_HOME", filepath.Join(t.TempDir(), "mq"))
	big := filepath.Join(t.TempDir(), "big.pub")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), maxPublicKey+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		stdin io.Reader
		msg   string
	}{
		{[]string{big}, nil, `cls: public key "` + big + `": too large: more than 65536 bytes` + "\n"},
		{[]string{"/dev/zero"}, nil, `cls: public key "/dev/zero": too large: more than 65536 bytes` + "\n"},
		{[]string{"-"}, bytes.NewReader(bytes.Repeat([]byte("x"), maxPublicKey+1)), `cls: public key "-": too large: more than 65536 bytes` + "\n"},
	} {
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: tc.stdin, Stdout: &out, Stderr: &errOut, Getwd: os.Getwd}
		if env.Stdin == nil {
			env.Stdin = strings.NewReader("")
		}
		done := make(chan int, 1)
		go func() {
			done <- mqcli.Run(context.Background(), Cls(env), append([]string{"cls", "key", "add", "--role", "user"}, tc.args...))
		}()
		var code int
		select {
		case code = <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("cls key add %s: still reading after 60s", tc.args)
		}
		if code != mqcli.ExitFailed || errOut.String() != tc.msg {
			t.Errorf("cls key add %s: exit %d, stderr %q; want exit 1, %q", tc.args, code, errOut.String(), tc.msg)
		}
	}
}

// TestSiteAddKeyPaths: cls site add --key and --known-hosts reach the
// CLS as absolute paths taken from the command's directory (over SSH,
// the home directory, not the CLS process's), and a name that is there
// but not a regular file is refused in one line: the CLS reads both at
// every connection to the site.
func TestSiteAddKeyPaths(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		flags []string
		want  string // in the request, or in the one-line error
		code  int
	}{
		{[]string{"--key", "id_hpc", "--known-hosts", ".ssh/known_hosts"}, `"key":"` + filepath.Join(home, "id_hpc") + `","known_hosts":"` + filepath.Join(home, ".ssh/known_hosts") + `"`, 0},
		{[]string{"--key", "/abs/./id"}, `"key":"/abs/id"`, 0},
		{[]string{"--key", "/dev/stdin"}, `--key "/dev/stdin" is not a regular file`, mqcli.ExitUsage},
		{[]string{"--known-hosts", "/dev/zero"}, `--known-hosts "/dev/zero" is not a regular file`, mqcli.ExitUsage},
		{[]string{"--key", "."}, `--key "` + home + `" is not a regular file`, mqcli.ExitUsage},
	} {
		var got string
		replies := map[string]clitest.Reply{protocol.OpSiteAdd.Name: {Body: protocol.SiteInfo{}, Seen: func(b json.RawMessage) { got = string(b) }}}
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: func() (string, error) { return home, nil }, Dial: clitest.Dial(replies)}
		args := append([]string{"cls", "site", "add", "c", "--type", "slurm", "--ssh", "u@h"}, tc.flags...)
		code := mqcli.Run(context.Background(), Cls(env), args)
		switch {
		case tc.code == 0 && (code != 0 || !strings.Contains(got, tc.want)):
			t.Errorf("%s: exit %d (%q), sent %s; want it to hold %s", strings.Join(tc.flags, " "), code, errOut.String(), got, tc.want)
		case tc.code != 0 && (code != tc.code || errOut.String() != "cls: "+tc.want+" (see cls site add --help)\n" || got != ""):
			t.Errorf("%s: exit %d, stderr %q, sent %q; want exit %d, %q and nothing sent", strings.Join(tc.flags, " "), code, errOut.String(), got, tc.code, tc.want)
		}
	}
}
