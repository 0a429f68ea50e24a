package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/protocol"
)

// FuzzServeConn feeds arbitrary bytes to a connection after a valid hello.
// The server must answer or disconnect, never panic, and ServeConn must
// return promptly once the peer goes away.
func FuzzServeConn(f *testing.F) {
	seeds := []string{
		`{"id":2,"op":"submit","body":{"jobs":[{"target":"a","command":"x"},{"target":"b","prereqs":["a"],"command":"y"}]}}`,
		`{"id":2,"op":"stat","body":{"states":"WQEDFBX","limit":3}}` + "\n" + `{"id":3,"op":"summary"}`,
		`{"id":2,"op":"register","body":{"site":"s","host":"h","slots":2}}` + "\n" +
			`{"id":3,"op":"next","body":{"placeholder":1,"free":2,"wait_ms":50}}` + "\n" +
			`{"id":4,"op":"report","body":{"placeholder":1,"reports":[{"id":1,"attempt":1,"exit":0}]}}` + "\n" +
			`{"id":5,"op":"heartbeat","body":{"placeholder":1,"running":[{"id":2,"attempt":1}]}}`,
		`{"id":2,"op":"bulk.add","body":{"line":1,"jobs":[{"target":"c","command":"z"}]}}` + "\n" + `{"id":3,"op":"bulk.commit"}`,
		`{"id":2,"op":"bulk.add","body":{"line":1,"jobs":[{"target":"c","command":"z"}]}}` + "\n" + `{"id":3,"op":"bulk.abort"}`,
		`{"id":2,"op":"wait","body":{"ids":[1,2],"timeout_ms":20}}`,
		`{"id":2,"op":"delete","body":{"target":"a"}}` + "\n" + `{"id":3,"op":"rerun","body":{"ids":[1]}}`,
		`{"id":2,"op":"queue.set","body":{"name":"q","policy":"sjf","ceiling_s":5}}` + "\n" + `{"id":3,"op":"queue.list"}`,
		`{"id":2,"op":"job","body":{"id":1}}`,
		`{"id":2,"op":"hello","body":{"proto":1}}`,
		"garbage\n\x00\xff{\n",
		`{"id":2,"op":"register","body":{"site":"s","host":"h","slots":2,"capacity":{"cpus":1,"gpus":1,"gpu_ids":["GPU 0"]}}}`,
		`{"id":2,"op":"submit","body":{"jobs":[{"target":"a","command":"x","prereqs":["b"]},{"target":"b","command":"x","prereqs":["a"]}]}}`,
	}
	for _, s := range seeds {
		f.Add(byte(0), []byte(s))
		f.Add(byte(1), []byte(s))
	}
	st, err := metaqueue.Open(context.Background(), metaqueue.Options{
		Path: filepath.Join(f.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: 30 * time.Second,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	srv := &Server{Store: st}
	f.Fuzz(func(t *testing.T, role byte, data []byte) {
		maxRole := protocol.RoleUser
		if role&1 == 1 {
			maxRole = protocol.RolePlaceholder
		}
		cli, sc := net.Pipe()
		served := make(chan struct{})
		go func() {
			defer close(served)
			srv.ServeConn(context.Background(), sc, maxRole)
		}()
		const sentinel = 18446744073709551615
		gotSentinel := make(chan struct{})
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			r := protocol.NewReader(cli)
			seen := false
			for {
				line, err := r.ReadLine()
				if err != nil {
					return
				}
				var resp protocol.Response
				if err := json.Unmarshal(line, &resp); err != nil {
					t.Errorf("server sent a malformed frame %q: %v", line, err)
					return
				}
				if resp.Err != nil && resp.Err.Code == protocol.CodeInternal {
					t.Errorf("internal error: %s", resp.Err.Msg)
				}
				if resp.ID == sentinel && !resp.More && !seen {
					seen = true
					close(gotSentinel)
				}
			}
		}()
		go func() {
			w := bufio.NewWriter(cli)
			cli.SetWriteDeadline(time.Now().Add(10 * time.Second))
			w.WriteString(`{"id":1,"op":"hello","body":{"proto":1}}` + "\n")
			w.Write(data)
			w.WriteString("\n" + `{"id":18446744073709551615,"op":"summary"}` + "\n")
			w.Flush()
		}()
		select {
		case <-gotSentinel:
		case <-readDone: // the server hung up: allowed
		case <-time.After(10 * time.Second):
			t.Fatal("no reply to a request sent after the fuzz input")
		}
		cli.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("ServeConn did not return after the peer closed")
		}
		<-readDone
	})
}
