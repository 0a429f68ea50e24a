package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/client"
)

// TestCutShort: an action on many jobs whose connection closed before the
// CLS answered says that the batches committed stay so and how to do the
// rest; any other error is left as it is.
func TestCutShort(t *testing.T) {
	err := cutShort(fmt.Errorf("delete: %w", client.ErrClosed), batchesDone("mqdel"))
	if !errors.Is(err, client.ErrClosed) || !strings.Contains(err.Error(), "the batches it committed stay so") || !strings.Contains(err.Error(), "mqdel again for the rest") {
		t.Errorf("cut short: %v", err)
	}
	other := errors.New("no such job")
	if got := cutShort(other, batchesDone("mqdel")); got != other {
		t.Errorf("another error became %v", got)
	}
	if cutShort(nil, "x") != nil {
		t.Error("nil became an error")
	}
}
