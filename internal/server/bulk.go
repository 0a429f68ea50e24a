package server

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/mq-hpc/mq/protocol"
)

// bulkItem is one bulk step; an add's raw lines are parsed as soon as it is
// read, while earlier steps are still being spooled.
type bulkItem struct {
	rt     *route
	req    *protocol.Request
	parsed chan struct{} // closed when add and err are set
	add    protocol.BulkAdd
	err    error
	// checked: add.Jobs were parsed from raw lines, each validated as read.
	checked bool

	commit protocol.BulkCommit // the body of a bulk.commit
	lookup bool                // a commit with a token and nothing spooled: asks for the token's outcome
	finish func()              // ends the commit's entry in Server.committing
}

// newBulkItem starts parsing a bulk step; add is its body if the read loop
// decoded it already (protocol.FastBulkAdd), else nil.
func newBulkItem(rt *route, req *protocol.Request, add *protocol.BulkAdd) *bulkItem {
	it := &bulkItem{rt: rt, req: req, parsed: make(chan struct{})}
	if req.Op != protocol.OpBulkAdd.Name {
		close(it.parsed)
		return it
	}
	go func() {
		defer close(it.parsed)
		if add != nil {
			it.add = *add
		} else {
			// Jobs sized first, as for raw lines below: encoding/json
			// appends into the capacity it finds, and growing a chunk of
			// 2,000 specs (mqsub --array's) copied it several times. At
			// most 10,000: a body is not trusted to be what it counts.
			n := min(bytes.Count(req.Body, []byte(`"command":`)), 10000)
			it.add.Jobs = make([]protocol.JobSpec, 0, n)
			if it.err = DecodeBody(req.Body, &it.add); it.err != nil {
				return
			}
		}
		b := &it.add
		if len(b.Data) == 0 {
			return
		}
		if len(b.Jobs) > 0 {
			it.err = protocol.Errorf(protocol.CodeBadRequest, "bulk.add takes jobs or data, not both")
			return
		}
		def := protocol.JobSpec{Queue: b.Queue, Cwd: b.Cwd, Env: b.Env, Resources: b.Defaults}
		// A JobSpec is ~300 bytes: growing the slice by appends copied
		// each chunk's specs several times (8 % of a 1,000,000-job -f).
		b.Jobs = make([]protocol.JobSpec, 0, bytes.Count(b.Data, []byte{'\n'})+1)
		err := protocol.ReadJobLines(bytes.NewReader(b.Data), b.Line, def, func(n int, js protocol.JobSpec) error {
			// mqsub -f sends raw lines from this host: inputs of no declared
			// size take the file's, as mqsub --in does.
			if err := protocol.FillSizes(&js, os.Stat); err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
			b.Jobs = append(b.Jobs, js)
			return nil
		})
		if err != nil {
			it.err = protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		it.checked = true
		b.Data = nil
	}()
	return it
}

// bulkAdd spools a parsed chunk; a failed one poisons the bulk until abort.
func bulkAdd(_ context.Context, c *conn, it *bulkItem) (protocol.Empty, error) {
	if c.bulkErr != nil {
		return protocol.Empty{}, c.bulkErr
	}
	if it.err != nil {
		if c.bulk != nil {
			c.bulk.Abort()
		}
		c.bulk, c.bulkErr = nil, it.err
		return protocol.Empty{}, it.err
	}
	if c.bulk == nil {
		bulk, err := c.s.Store.NewBulk()
		if err != nil {
			return protocol.Empty{}, err
		}
		c.bulk, c.bulkAsking = bulk, 0
	}
	c.bulkAsking += countAsking(it.add.Jobs)
	add := c.bulk.Add
	if it.checked {
		add = c.bulk.AddChecked
	}
	if err := add(it.add.Line, it.add.Jobs); err != nil {
		c.bulk.Abort()
		c.bulk, c.bulkErr = nil, err
		return protocol.Empty{}, err
	}
	return protocol.Empty{}, nil
}

// bulkCommit commits the spooled jobs, or answers a question about a
// token's commit.
func bulkCommit(ctx context.Context, c *conn, it *bulkItem) (protocol.SubmitReply, error) {
	if it.finish != nil {
		defer it.finish()
	}
	if it.err != nil {
		return protocol.SubmitReply{}, it.err
	}
	if err := c.bulkErr; err != nil {
		c.bulkErr = nil
		return protocol.SubmitReply{}, err
	}
	if c.bulk == nil {
		if it.lookup {
			return c.bulkOutcome(ctx, it.commit.Token)
		}
		return protocol.SubmitReply{}, protocol.Errorf(protocol.CodeBadRequest, "no jobs to submit")
	}
	b := c.bulk
	c.bulk = nil
	if it.commit.Array != "" || it.commit.ArrayLimit != 0 {
		if err := b.Array(it.commit.Array, it.commit.ArrayLimit); err != nil {
			b.Abort()
			return protocol.SubmitReply{}, err
		}
	}
	if err := b.SharedEnv(it.commit.Env); err != nil {
		b.Abort()
		return protocol.SubmitReply{}, err
	}
	asking := c.bulkAsking
	c.bulkAsking = 0
	first, n, err := b.CommitToken(ctx, it.commit.Token)
	if err != nil {
		return protocol.SubmitReply{}, err
	}
	w := append(c.s.resourceWarnings(ctx, asking, first, n), c.s.bulkPrereqWarnings(ctx, first, first+int64(n)-1)...)
	return protocol.SubmitReply{First: first, Count: n, Warnings: w}, nil
}

func bulkAbort(_ context.Context, c *conn, _ *bulkItem) (protocol.Empty, error) {
	c.bulkErr, c.bulkAsking = nil, 0
	if c.bulk != nil {
		c.bulk.Abort()
		c.bulk = nil
	}
	return protocol.Empty{}, nil
}

// bulkOutcome answers a commit that only names a token: the ids of the
// bulk committed with it, once no commit with it is under way, or
// not_found.
func (c *conn) bulkOutcome(ctx context.Context, token string) (protocol.SubmitReply, error) {
	if err := c.s.awaitCommits(ctx, token); err != nil {
		return protocol.SubmitReply{}, err
	}
	first, n, found, err := c.s.Store.BulkOutcome(ctx, token)
	if err != nil {
		return protocol.SubmitReply{}, err
	}
	if !found {
		return protocol.SubmitReply{}, protocol.Errorf(protocol.CodeNotFound, "no bulk submission was committed with token %q", token)
	}
	return protocol.SubmitReply{First: first, Count: n}, nil
}
