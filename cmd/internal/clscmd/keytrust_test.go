package clscmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/otheruser"
	"github.com/mq-hpc/mq/internal/sshkey"
)

// TestKeyAddTrust: the key cls key add accepts acts as the user, so a
// public key file another user could have written (mode 0666) or put in
// place (theirs) is refused in one line naming it and the way out; the
// same key given on stdin, or in a file of the user's, is accepted.
func TestKeyAddTrust(t *testing.T) {
	t.Setenv("MQ_HOME", filepath.Join(t.TempDir(), "mq"))
	dir := t.TempDir()
	run := func(stdin string, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd}
		code := mqcli.Run(context.Background(), Cls(env), append([]string{"cls", "key", "add", "--role", "user"}, args...))
		return code, errOut.String()
	}
	pubOf := func(name string) (string, []byte) {
		priv := filepath.Join(dir, name)
		if _, err := sshkey.NewKeyPair(priv, name); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(priv + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		return priv + ".pub", b
	}
	loose, looseKey := pubOf("loose")
	if err := os.Chmod(loose, 0o666); err != nil {
		t.Fatal(err)
	}
	if code, msg := run("", loose); code != mqcli.ExitFailed || !strings.Contains(msg, loose+" is writable by others (mode 0666)") ||
		!strings.Contains(msg, "cls key add --role user - < "+loose) || strings.Count(msg, "\n") != 1 {
		t.Errorf("cls key add of a 0666 file: exit %d, %q; want exit 1 and one line naming it and the way out", code, msg)
	}
	if code, msg := run(string(looseKey), "-"); code != 0 {
		t.Errorf("cls key add - of that key: exit %d, %q", code, msg)
	}
	mine, _ := pubOf("mine")
	if code, msg := run("", mine); code != 0 {
		t.Errorf("cls key add of a file of ours: exit %d, %q", code, msg)
	}

	_, uid, gid := otheruser.Need(t)
	theirs, _ := pubOf("theirs")
	if err := os.Chown(theirs, uid, gid); err != nil {
		t.Fatal(err)
	}
	if code, msg := run("", theirs); code != mqcli.ExitFailed || !strings.Contains(msg, theirs+" is owned by uid") {
		t.Errorf("cls key add of another user's file: exit %d, %q; want exit 1 naming it", code, msg)
	}
}
