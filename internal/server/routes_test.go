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
	answerZero(srv, protocol.OpFilesList)
	answerZero(srv, protocol.OpFilesGet)
	answerZero(srv, protocol.OpFilesAdd)
	answerZero(srv, protocol.OpFilesRemove)
	answerZero(srv, protocol.OpSiteAdd)
	answerZero(srv, protocol.OpSiteList)
	answerZero(srv, protocol.OpSiteRemove)
	answerZero(srv, protocol.OpSiteSet)
	answerZero(srv, protocol.OpPlanMake)
	answerZero(srv, protocol.OpPlanShow)
	answerZero(srv, protocol.OpPlanClear)
	RouteStream(srv, protocol.OpOutputStream, func(context.Context, protocol.OutputQuery, func(protocol.OutputFrame) error) error {
		return nil
	})
}

// answerZero routes op to a handler that answers its zero reply.
func answerZero[Req, Resp any](srv *Server, op protocol.Op[Req, Resp]) {
	Route(srv, op, func(context.Context, Req) (Resp, error) {
		var zero Resp
		return zero, nil
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
