package protocol

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the op table in docs/reference/protocol.md")

// renderOps renders the declared ops as the Markdown table docs/reference/protocol.md
// holds between its ops markers.
func renderOps() string {
	var b strings.Builder
	b.WriteString("| op | request → reply | roles | durable | what it does |\n|---|---|---|---|---|\n")
	for _, o := range Ops() {
		reply := "`" + o.Reply + "`"
		if o.Streams {
			reply = "stream of `" + o.Reply + "`"
		}
		note := ""
		if o.Durable {
			note = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` → %s | %s | %s | %s |\n", o.Name, o.Request, reply, strings.Join(o.Roles(), ", "), note, o.Doc)
	}
	return b.String()
}

const (
	opsBegin = "<!-- ops:begin (generated: go test ./protocol -run TestProtocolDoc -update) -->\n"
	opsEnd   = "<!-- ops:end -->\n"
)

// TestProtocolDoc checks that docs/reference/protocol.md lists exactly the declared
// ops; -update rewrites its table.
func TestProtocolDoc(t *testing.T) {
	const path = "../docs/reference/protocol.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte(opsBegin))
	j := bytes.Index(doc, []byte(opsEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q markers", path, strings.TrimSpace(opsBegin), strings.TrimSpace(opsEnd))
	}
	have := string(doc[i+len(opsBegin) : j])
	want := renderOps()
	if have == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, doc[:i+len(opsBegin)]...), want...), doc[j:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the op table in %s is not the declarations'; run go test ./protocol -run TestProtocolDoc -update\nhave:\n%s\nwant:\n%s", path, have, want)
}

func TestOpsDeclared(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range Ops() {
		if seen[o.Name] {
			t.Errorf("op %s declared twice", o.Name)
		}
		seen[o.Name] = true
		if got, ok := Lookup(o.Name); !ok || got != o {
			t.Errorf("Lookup(%q) = %+v, %v", o.Name, got, ok)
		}
		if o.Request == "" || o.Reply == "" || strings.Contains(o.Doc, "\n") || strings.Contains(o.Doc, "|") {
			t.Errorf("op %s: %+v", o.Name, o)
		}
	}
	// The wire names are the protocol's: they must not change.
	for _, name := range []string{"hello", "submit", "bulk.add", "bulk.commit", "bulk.abort", "stat", "job",
		"summary", "delete", "rerun", "wait", "output.read", "queue.list", "queue.set", "register", "next", "report",
		"heartbeat", "output", "site.add", "site.list", "site.remove", "site.set", "progress",
		"files.list", "files.get", "files.add", "files.rm", "plan.make", "plan.show", "plan.clear", "output.stream", "arrays",
		"files.poll", "files.pull", "files.push", "files.done", "hold", "release", "purge", "output.ship", "alter"} {
		if !seen[name] {
			t.Errorf("op %s is not declared", name)
		}
		delete(seen, name)
	}
	for name := range seen {
		t.Errorf("op %s is new: add it to this list and to docs/reference/protocol.md", name)
	}
	if OpBulkAdd.Name != bulkAddName {
		t.Errorf("FastBulkAdd matches %q, not %q", bulkAddName, OpBulkAdd.Name)
	}
}

// The roles allowed each op are as they were when they were two hand-kept
// maps: placeholder ops open to all, site.add, site.remove (and site.set) admin only,
// the rest user and admin.
func TestOpRoles(t *testing.T) {
	placeholder := map[string]bool{"hello": true, "register": true, "next": true, "report": true, "heartbeat": true, "output": true, "output.ship": true,
		"files.poll": true, "files.pull": true, "files.push": true, "files.done": true}
	admin := map[string]bool{"site.add": true, "site.remove": true, "site.set": true}
	for _, o := range Ops() {
		want := []string{RoleAdmin, RoleUser}
		switch {
		case placeholder[o.Name]:
			want = append(want, RolePlaceholder)
		case admin[o.Name]:
			want = want[:1]
		}
		if got := o.Roles(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("op %s: roles %v, want %v", o.Name, got, want)
		}
	}
}
