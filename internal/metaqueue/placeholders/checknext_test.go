package placeholders

import (
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func TestCheckNext(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  protocol.Next
		want string // "" = accepted
	}{
		{"idle", protocol.Next{}, ""},
		{"full", protocol.Next{Free: MaxFree, Ahead: MaxFree, WaitMS: 1000, WalltimeLeft: 60}, ""},
		{"negative free", protocol.Next{Free: -1}, "free slots must be 0..4096, not -1"},
		{"too many free", protocol.Next{Free: MaxFree + 1}, "free slots must be 0..4096, not 4097"},
		{"negative wait", protocol.Next{Free: 1, WaitMS: -1}, "wait_ms"},
		{"negative walltime", protocol.Next{Free: 1, WalltimeLeft: -1}, "walltime_left_s"},
		{"too many started", protocol.Next{Free: 1, Started: make([]protocol.JobRef, protocol.MaxStarted+1)}, "started lists"},
		{"ahead past free", protocol.Next{Free: 2, Ahead: 3}, "ahead must be 0..free (2), not 3"},
		{"negative ahead", protocol.Next{Free: 2, Ahead: -1}, "ahead must be 0..free (2), not -1"},
	} {
		err := CheckNext(tc.req)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !protocol.IsCode(err, protocol.CodeBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a bad request saying %q", tc.name, err, tc.want)
		}
	}
}
