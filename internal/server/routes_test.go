package server

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// routeCLS routes the ops the CLS serves (sites and files) as it does,
// with handlers that only answer.
func routeCLS(srv *Server) {
	Route(srv, protocol.OpFilesList, func(context.Context, protocol.FilesQuery) (protocol.FilesReply, error) {
		return protocol.FilesReply{}, nil
	})
	Route(srv, protocol.OpFilesGet, func(context.Context, protocol.FilesGet) (protocol.TransferInfo, error) {
		return protocol.TransferInfo{}, nil
	})
	Route(srv, protocol.OpFilesAdd, func(context.Context, protocol.FilesAdd) (protocol.CatalogFile, error) {
		return protocol.CatalogFile{}, nil
	})
	Route(srv, protocol.OpFilesRemove, func(context.Context, protocol.FilesRemove) (protocol.CatalogFile, error) {
		return protocol.CatalogFile{}, nil
	})
	Route(srv, protocol.OpSiteAdd, func(context.Context, protocol.SiteSpec) (protocol.SiteInfo, error) {
		return protocol.SiteInfo{}, nil
	})
	Route(srv, protocol.OpSiteList, func(context.Context, protocol.Empty) (protocol.SiteList, error) {
		return protocol.SiteList{}, nil
	})
	Route(srv, protocol.OpSiteRemove, func(context.Context, protocol.SiteRemove) (protocol.SiteInfo, error) {
		return protocol.SiteInfo{}, nil
	})
	Route(srv, protocol.OpSiteSet, func(context.Context, protocol.SiteSet) (protocol.SiteInfo, error) {
		return protocol.SiteInfo{}, nil
	})
	Route(srv, protocol.OpPlanMake, func(context.Context, protocol.PlanMake) (protocol.PlanSummary, error) {
		return protocol.PlanSummary{}, nil
	})
	Route(srv, protocol.OpPlanShow, func(context.Context, protocol.PlanShow) (protocol.PlanShowReply, error) {
		return protocol.PlanShowReply{}, nil
	})
	Route(srv, protocol.OpPlanClear, func(context.Context, protocol.Empty) (protocol.PlanClearReply, error) {
		return protocol.PlanClearReply{}, nil
	})
	RouteStream(srv, protocol.OpOutputStream, func(context.Context, protocol.OutputQuery, func(protocol.OutputFrame) error) error {
		return nil
	})
}

// Every declared op is served by the metaqueue's routes, or left to the
// CLS (the site and files ops) and answered unsupported until it routes
// them.
func TestEveryOpRouted(t *testing.T) {
	t.Parallel()
	byCLS := []string{protocol.OpFilesList.Name, protocol.OpFilesGet.Name, protocol.OpFilesAdd.Name, protocol.OpFilesRemove.Name,
		protocol.OpOutputStream.Name, protocol.OpSiteAdd.Name, protocol.OpSiteList.Name, protocol.OpSiteRemove.Name,
		protocol.OpSiteSet.Name, protocol.OpPlanMake.Name, protocol.OpPlanShow.Name, protocol.OpPlanClear.Name}
	for _, o := range protocol.Ops() {
		r := builtin[o.Name]
		if slices.Contains(byCLS, o.Name) {
			if r != nil {
				t.Errorf("%s is served by the server itself; want it routed by the CLS", o.Name)
			}
			continue
		}
		if r == nil || r.serve == nil && r.bulk == nil {
			t.Errorf("%s has no route", o.Name)
			continue
		}
		if r.op != o {
			t.Errorf("%s is routed as %+v, declared as %+v", o.Name, r.op, o)
		}
	}
	for name := range builtin {
		if _, ok := protocol.Lookup(name); !ok {
			t.Errorf("route %s is not a declared op", name)
		}
	}

	bare := &Server{Store: newStore(t)}
	if got := bare.Unrouted(); !slices.Equal(got, byCLS) {
		t.Errorf("unrouted on a bare server: %v, want %v", got, byCLS)
	}
	p := connect(t, bare, protocol.RoleAdmin)
	p.hello("")
	for _, name := range byCLS {
		p.fails(name, nil, protocol.CodeUnsupported)
	}

	wired := &Server{Store: newStore(t)}
	routeCLS(wired)
	if got := wired.Unrouted(); len(got) != 0 {
		t.Errorf("unrouted on a wired server: %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("routing an op twice did not panic")
		}
	}()
	routeCLS(wired)
}

// Each op is refused exactly to the roles its declaration leaves out: a
// placeholder connection sends only placeholder ops, and only admin sends
// admin ops.
func TestRolesPerOp(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	routeCLS(srv)
	for _, role := range []string{protocol.RolePlaceholder, protocol.RoleUser, protocol.RoleAdmin} {
		p := connect(t, srv, protocol.RoleAdmin)
		p.hello(role)
		for _, o := range protocol.Ops() {
			// An empty body: refused for what it lacks, if not for the role.
			r, _ := p.call(o.Name, json.RawMessage(`{}`))
			refused := r.Err != nil && r.Err.Code == protocol.CodeForbidden &&
				(strings.Contains(r.Err.Msg, "may not") || strings.Contains(r.Err.Msg, "needs the admin role"))
			if refused == o.Allows(role) {
				t.Errorf("%s from %s: %+v; allowed: %v", o.Name, role, r.Err, o.Allows(role))
			}
			switch {
			case !refused:
			case role == protocol.RolePlaceholder && !strings.Contains(r.Err.Msg, "a placeholder may not "+o.Name):
				t.Errorf("%s from a placeholder: %q", o.Name, r.Err.Msg)
			case role != protocol.RolePlaceholder && !strings.Contains(r.Err.Msg, o.Name+" needs the admin role"):
				t.Errorf("%s from %s: %q", o.Name, role, r.Err.Msg)
			}
		}
	}
}
