package clscmd

import (
	"flag"
	"os"
	"os/exec"
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
