package stage_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/mq-hpc/mq/internal/stage"
)

// A file moves from the CLS host (here a temporary directory standing in
// for "/") to a site's data root, verified by its SHA-256. A site reached
// over SSH would be stage.SFTP{Client: c, Root: ".mq-data/CLSID"}, with c
// from login.SSH.SFTP.
func Example() {
	host, _ := os.MkdirTemp("", "cls-host")
	site, _ := os.MkdirTemp("", "site-data")
	defer os.RemoveAll(host)
	defer os.RemoveAll(site)
	os.MkdirAll(filepath.Join(host, "proj/seqs"), 0o755)
	os.WriteFile(filepath.Join(host, "proj/seqs/p1.fa"), []byte(">p1\nMKV\n"), 0o644)

	places := map[string]stage.Place{
		"local": stage.Dir{Root: host},
		"sge":   stage.Dir{Root: site},
	}
	m := &stage.Mover{
		Places: func(name string) (stage.Place, error) {
			if p, ok := places[name]; ok {
				return p, nil
			}
			return nil, fmt.Errorf("no place %q", name)
		},
		Rates: &stage.Rates{},
	}
	res := m.Move(context.Background(), stage.Transfer{
		Path: "/proj/seqs/p1.fa", From: "local", To: "sge",
		Size:   8,
		SHA256: "", // unknown: computed and returned
	})
	if res.Err != nil {
		log.Fatal(res.Err)
	}
	fmt.Println(res.Bytes, res.SHA256)
	data, _ := os.ReadFile(filepath.Join(site, "proj/seqs/p1.fa"))
	fmt.Printf("%q\n", data)

	_, err := stage.Rooted(site, "/proj/../../etc/passwd")
	fmt.Println(err)
	// Output:
	// 8 f04524ca139a684f2027e2c054ce15399ccb7986dbf8b347f0a1f6342e8335ea
	// ">p1\nMKV\n"
	// path refused: "/proj/../../etc/passwd" holds ..
}
