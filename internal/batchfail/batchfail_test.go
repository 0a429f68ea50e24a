package batchfail

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// codeErr stands in for the SQLite driver's errors, which carry a code.
type codeErr int

func (c codeErr) Error() string { return fmt.Sprintf("sqlite code %d", int(c)) }
func (c codeErr) Code() int     { return int(c) }

func TestIsFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("boom"), false},
		{"full", codeErr(13), true},
		{"full extended", codeErr(13 | 3<<8), true},
		{"busy", codeErr(5), false},
		{"wrapped full", fmt.Errorf("commit: %w", codeErr(13)), true},
		{"joined full", errors.Join(errors.New("rollback"), codeErr(13)), true},
	} {
		if got := IsFull(tc.err); got != tc.want {
			t.Errorf("%s: IsFull = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
		has   []string
		hasnt string
	}{
		{"other", errors.New("disk I/O error"), []string{"metaqueue storage failure: disk I/O error"}, "free space"},
		{"full", codeErr(13), []string{"nothing was changed", "free space on the filesystem of /var/mq"}, ""},
	} {
		err := Answer(tc.cause, "/var/mq")
		if !protocol.IsCode(err, protocol.CodeInternal) {
			t.Errorf("%s: %v is not CodeInternal", tc.name, err)
		}
		for _, s := range tc.has {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q lacks %q", tc.name, err, s)
			}
		}
		if tc.hasnt != "" && strings.Contains(err.Error(), tc.hasnt) {
			t.Errorf("%s: %q has %q", tc.name, err, tc.hasnt)
		}
	}
}

// TestIsStore: a module's wrapped database failure is told from its
// refusals, wrapped again or not.
func TestIsStore(t *testing.T) {
	broken := errors.New("disk I/O error")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{Store{Err: broken}, true},
		{fmt.Errorf("site a: %w", Store{Err: broken}), true},
		{protocol.Errorf(protocol.CodeBadRequest, "no such site"), false},
		{broken, false},
		{nil, false},
	} {
		if got := IsStore(tc.err); got != tc.want {
			t.Errorf("IsStore(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !errors.Is(Store{Err: broken}, broken) || (Store{Err: broken}).Error() != broken.Error() {
		t.Error("Store does not wrap its error")
	}
}
