package site

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/protocol"
)

// A login host slow to connect to (a dial, a handshake, the agent's upload
// over a slow link) holds the site's connection lock for as long: cls site
// list, and every placeholder's registration, which take the Manager's
// lock, must not wait for it. (Platform once read under that lock, and
// cls site list hung for the whole dial.)
func TestSlowLoginDoesNotBlockManager(t *testing.T) {
	dialing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r := &Remote{Spec: protocol.SiteSpec{Name: "slow", Type: Slurm, SSH: "u@h"}, Batch: ForType(Slurm), JobName: "mq-slow-x",
		Dial: func(ctx context.Context) (login.Runner, error) {
			once.Do(func() { close(dialing) })
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, errors.New("cannot reach the login host h:22: i/o timeout")
		}}
	st := &fakeStore{ready: 1}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return r, nil }}
	ctx := startManager(t, m)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "slow", Type: Slurm, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dialing:
	case <-time.After(30 * time.Second):
		t.Fatal("the site never dialled its login host")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.List()
		m.Placeholder(1, protocol.Register{Site: "slow"}, true)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("cls site list and a placeholder's registration waited for the dial of a slow login host")
	}
	close(release)
	eventually(t, "degraded", func() bool { return m.List()[0].State == StateDegraded })
}
