package clscmd

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/reference/cli.md from the flag definitions")

// TestCLIReference checks that the committed CLI reference is what the
// flag definitions generate, so a new or changed flag shows in the docs.
func TestCLIReference(t *testing.T) {
	const path = "../../../docs/reference/cli.md"
	md, err := cliMarkdown()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != md {
		t.Errorf("%s differs from what the flags generate: run go test ./cmd/internal/clscmd -run TestCLIReference -update", path)
	}
}

// TestDocLinks runs scripts/checklinks.sh: every relative link in the
// repository's Markdown files, this reference's included, must resolve.
func TestDocLinks(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash:", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git:", err)
	}
	out, err := exec.Command("bash", "../../../scripts/checklinks.sh").CombinedOutput()
	if err != nil {
		t.Errorf("scripts/checklinks.sh: %v\n%s", err, out)
	}
}

// TestWriteDocsSharedDir: cls docs writes its pages into a directory of
// the user's (made if need be, or there already), and refuses one others
// can write, where a link planted at a page's name would have the page
// overwrite a file of the user's; the file is left whole.
func TestWriteDocsSharedDir(t *testing.T) {
	t.Parallel()
	own := filepath.Join(t.TempDir(), "a", "docs")
	if err := writeDocs(own); err != nil {
		t.Fatalf("a new directory: %v", err)
	}
	if err := writeDocs(own); err != nil {
		t.Fatalf("again, over its own pages: %v", err)
	}
	if _, err := os.Stat(filepath.Join(own, "man1", "mqsub.1")); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "bashrc")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir, link string }{
		{"top", "shared", "cli.md"},
		{"sub", "shared/bash", "mqsub"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := filepath.Join(t.TempDir(), "shared")
			d := filepath.Join(filepath.Dir(top), tc.dir)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(d, tc.link)); err != nil {
				t.Fatal(err)
			}
			err := writeDocs(top)
			if err == nil || !strings.Contains(err.Error(), "every user can write") {
				t.Errorf("writeDocs into a directory others write: %v; want a refusal", err)
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep" {
				t.Fatalf("the file the link names was overwritten: %.40q", b)
			}
		})
	}
}
