package waits

import (
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  protocol.Wait
		want string // "" = accepted
	}{
		{"one job", protocol.Wait{IDs: []int64{1}}, ""},
		{"with timeout", protocol.Wait{IDs: []int64{1, 2}, TimeoutMS: 1000, Any: true}, ""},
		{"no jobs", protocol.Wait{TimeoutMS: 10}, "no jobs to wait for"},
		{"negative timeout", protocol.Wait{IDs: []int64{1}, TimeoutMS: -1}, "timeout_ms"},
	} {
		err := Check(tc.req)
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
