package site

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// updatableStore is a fakeStore that takes site changes.
type updatableStore struct{ *fakeStore }

func (updatableStore) UpdateSite(context.Context, protocol.SiteSpec) error { return nil }

// TestSetEmbeddedSite: cls site set on the CLS's own site (cls site set
// local --price 1, as the deadline-and-budget docs lead one to try) is
// refused saying what does it: a site of type local of one's own, not
// only a restart with another --local, which changes their number alone.
func TestSetEmbeddedSite(t *testing.T) {
	lf := &localFake{procs: map[string]bool{}}
	m := &Manager{Store: updatableStore{&fakeStore{}}, Poll: time.Hour,
		Embedded: []protocol.SiteSpec{{Name: EmbeddedName, Type: Local, Min: 1, Max: 1, Slots: 1}},
		Open: func(spec protocol.SiteSpec, exited func(int)) (Site, error) {
			lf.exited = exited
			return lf, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	price := 1.0
	_, err := m.Set(ctx, protocol.SiteSet{Name: EmbeddedName, Price: &price})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(err.Error(), "cls site add NAME --type local") {
		t.Errorf("cls site set local --price 1: %v; want a refusal naming cls site add NAME --type local", err)
	}
}
