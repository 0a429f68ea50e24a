package metaqueue

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/mq-hpc/mq/internal/metaqueue/tokens"
	"github.com/mq-hpc/mq/protocol"
)

// Bulk is a submission too large for one request (`mqsub -f`). Chunks are
// validated and spooled to a file as they arrive, so the core is not held
// while a client uploads; Commit then adds every job in one transaction.
type Bulk struct {
	s     *Store
	f     *os.File
	w     *bufio.Writer
	n     int
	size  int64 // bytes spooled
	edges edgeSet
	buf   []byte
	// A job array (Array): its --array text and cap.
	array      bool
	arraySpec  string
	arrayLimit int
}

// Defaults of Options.MaxBulkJobs and MaxBulkBytes: the largest job array
// (mqsub --array) and room for it with long commands.
const (
	DefaultMaxBulkJobs  = 10_000_000
	DefaultMaxBulkBytes = 4 << 30
)

// bigCommit is the size of a bulk commit after which the heap is given
// back to the OS at once.
const bigCommit = 100000

// NewBulk starts a bulk submission.
func (s *Store) NewBulk() (*Bulk, error) {
	dir := s.opt.SpoolDir
	if dir == "" {
		dir = filepath.Dir(s.opt.Path)
	}
	f, err := os.CreateTemp(dir, "bulk-*.spool")
	if err != nil {
		return nil, fmt.Errorf("bulk submit: %w", err)
	}
	os.Remove(f.Name()) // the open file is all we need; nothing to clean up after a crash
	return &Bulk{s: s, f: f, w: bufio.NewWriterSize(f, 1<<20), edges: newEdgeSet()}, nil
}

// Len is the number of jobs spooled so far.
func (b *Bulk) Len() int { return b.n }

// Add validates and spools jobs; line is the input line of specs[0].
func (b *Bulk) Add(line int, specs []protocol.JobSpec) error {
	maxJobs := cmp.Or(b.s.opt.MaxBulkJobs, DefaultMaxBulkJobs)
	if len(specs) > maxJobs-b.n {
		return protocol.Errorf(protocol.CodeTooLarge, "line %d: a bulk submission holds at most %d jobs", line+max(0, maxJobs-b.n), maxJobs)
	}
	maxBytes := cmp.Or(b.s.opt.MaxBulkBytes, DefaultMaxBulkBytes)
	for i := range specs {
		js := &specs[i]
		if err := protocol.ValidateSpec(js); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "line %d: %v", line+i, err)
		}
		b.edges.add(js)
		b.buf = appendSpec(b.buf[:0], js)
		if b.size += int64(len(b.buf)); b.size > maxBytes {
			return protocol.Errorf(protocol.CodeTooLarge, "line %d: a bulk submission spools at most %d bytes on the CLS", line+i, maxBytes)
		}
		if _, err := b.w.Write(b.buf); err != nil {
			return fmt.Errorf("bulk submit: spool: %w", err)
		}
	}
	b.n += len(specs)
	return nil
}

// Abort discards the spooled jobs.
func (b *Bulk) Abort() { b.f.Close() }

// Commit adds every spooled job in one transaction and returns the first id;
// ids are contiguous. The Bulk is finished either way.
func (b *Bulk) Commit(ctx context.Context) (first int64, err error) {
	first, _, err = b.CommitToken(ctx, "")
	return first, err
}

// CommitToken is Commit with an idempotency token (empty: none), recorded in
// the commit's transaction. If a commit with this token was already made,
// nothing is added and that commit's ids are returned: a client whose
// connection died during the commit may upload again and commit with the
// same token, whichever of the two commits runs first. count is the number
// of jobs the returned ids cover.
func (b *Bulk) CommitToken(ctx context.Context, token string) (first int64, count int, err error) {
	defer b.f.Close()
	if b.n == 0 {
		return 0, 0, protocol.Errorf(protocol.CodeBadRequest, "no jobs to submit")
	}
	if err := tokens.Check(token); err != nil {
		return 0, 0, err
	}
	if err := b.w.Flush(); err != nil {
		return 0, 0, fmt.Errorf("bulk submit: spool: %w", err)
	}
	s := b.s
	inserted := false
	err = s.doDurable(ctx, func() error {
		if done, err := s.tokenIDs(token); err != nil || done != nil {
			if len(done) > 0 {
				first, count = done[0], len(done)
			}
			return err
		}
		if _, err := b.f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("bulk submit: spool: %w", err)
		}
		if c := s.g.FindCycle(b.edges.out); c != "" {
			return protocol.Errorf(protocol.CodeBadRequest, "prerequisites would form a cycle: %s", c)
		}
		r := bufio.NewReaderSize(b.f, 1<<20)
		first, count = s.nextID, b.n
		ins := s.newInserter()
		var js protocol.JobSpec
		for i := 0; i < b.n; i++ {
			if err := readSpec(r, &js); err != nil {
				// The spool is ours; a short read means the disk failed us.
				// Jobs may already be applied in memory: fail the batch.
				return fatalError{fmt.Errorf("bulk spool: %w", err)}
			}
			if err := ins.add(&js); err != nil {
				return err
			}
		}
		if err := ins.flush(); err != nil {
			return err
		}
		if b.array {
			if err := s.saveArray(first, first+int64(b.n)-1, b.arraySpec, b.arrayLimit); err != nil {
				return err
			}
		}
		inserted = true
		return s.saveToken(token, first, b.n)
	})
	if err == nil && inserted {
		// A large transaction filled the page cache; give the memory back.
		s.do(ctx, func() error {
			_, err := s.w.ExecContext(ctx, connSQL.Get("ShrinkMemory"))
			return err
		})
		if b.n >= bigCommit {
			// So did the commit's garbage (the spooled specs read back, the
			// edge set, grown tables): the heap peaked near twice what
			// stays live, and the runtime would hold that peak for minutes
			// (1,000,000 jobs). One collection is a small part
			// of such a commit.
			b.edges = edgeSet{}
			debug.FreeOSMemory()
		}
	}
	return first, count, err
}

// BulkOutcome says whether a bulk commit (or submit) with token was
// committed, and if so its ids first..first+count-1. It goes through the
// core, so a commit already handed to the core is decided first.
func (s *Store) BulkOutcome(ctx context.Context, token string) (first int64, count int, found bool, err error) {
	if token == "" || len(token) > tokens.MaxLen {
		return 0, 0, false, protocol.Errorf(protocol.CodeBadRequest, "a token of 1 to %d bytes is needed", tokens.MaxLen)
	}
	err = s.do(ctx, func() error {
		ids, err := s.tokenIDs(token)
		if len(ids) > 0 {
			first, count, found = ids[0], len(ids), true
		}
		return err
	})
	return first, count, found, err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendSpec(b []byte, js *protocol.JobSpec) []byte {
	b = appendString(b, js.Queue)
	b = appendString(b, js.Target)
	b = appendString(b, js.Command)
	b = appendString(b, js.Cwd)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(js.Est))
	b = binary.AppendUvarint(b, uint64(len(js.Prereqs)))
	for _, p := range js.Prereqs {
		b = appendString(b, p)
	}
	b = binary.AppendUvarint(b, uint64(len(js.AfterAny)))
	for _, p := range js.AfterAny {
		b = appendString(b, p)
	}
	for _, files := range [][]protocol.File{js.Inputs, js.Outputs} {
		b = binary.AppendUvarint(b, uint64(len(files)))
		for _, f := range files {
			b = appendString(b, f.Path)
			size := uint64(0) // unknown; else size+1
			if f.Size != nil {
				size = uint64(*f.Size) + 1
			}
			b = binary.AppendUvarint(b, size)
			var rel uint64
			if f.Rel {
				rel = 1
			}
			b = binary.AppendUvarint(b, rel)
			b = binary.AppendVarint(b, f.MTime)
		}
	}
	env := protocol.EnvList(js.Env)
	b = binary.AppendUvarint(b, uint64(len(env)))
	for _, kv := range env {
		b = appendString(b, kv)
	}
	var flags uint64
	if js.NoReplicate {
		flags |= 1
	}
	if js.Hold {
		flags |= 2
	}
	var res []byte
	if js.Resources.Asks() {
		flags |= 4
		res, _ = json.Marshal(js.Resources) // plain values: cannot fail
	}
	b = binary.AppendUvarint(b, flags)
	b = binary.AppendVarint(b, int64(js.Priority))
	if flags&4 != 0 {
		b = appendString(b, string(res))
	}
	return b
}

func readString(r *bufio.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if n > protocol.MaxFrame {
		return "", errors.New("corrupt spool")
	}
	buf := make([]byte, n)
	_, err = io.ReadFull(r, buf)
	return string(buf), err
}

func readSpec(r *bufio.Reader, js *protocol.JobSpec) (err error) {
	*js = protocol.JobSpec{}
	if js.Queue, err = readString(r); err != nil {
		return err
	}
	if js.Target, err = readString(r); err != nil {
		return err
	}
	if js.Command, err = readString(r); err != nil {
		return err
	}
	if js.Cwd, err = readString(r); err != nil {
		return err
	}
	var est [8]byte
	if _, err = io.ReadFull(r, est[:]); err != nil {
		return err
	}
	js.Est = math.Float64frombits(binary.LittleEndian.Uint64(est[:]))
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	if n > 10000 {
		return errors.New("corrupt spool")
	}
	for ; n > 0; n-- {
		p, err := readString(r)
		if err != nil {
			return err
		}
		js.Prereqs = append(js.Prereqs, p)
	}
	if n, err = binary.ReadUvarint(r); err != nil {
		return err
	}
	if n > 10000 {
		return errors.New("corrupt spool")
	}
	for ; n > 0; n-- {
		p, err := readString(r)
		if err != nil {
			return err
		}
		js.AfterAny = append(js.AfterAny, p)
	}
	for _, files := range []*[]protocol.File{&js.Inputs, &js.Outputs} {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return err
		}
		if n > protocol.MaxFiles {
			return errors.New("corrupt spool")
		}
		for ; n > 0; n-- {
			f := protocol.File{}
			if f.Path, err = readString(r); err != nil {
				return err
			}
			size, err := binary.ReadUvarint(r)
			if err != nil {
				return err
			}
			if size > 0 {
				v := int64(size - 1)
				f.Size = &v
			}
			rel, err := binary.ReadUvarint(r)
			if err != nil {
				return err
			}
			f.Rel = rel == 1
			if f.MTime, err = binary.ReadVarint(r); err != nil {
				return err
			}
			*files = append(*files, f)
		}
	}
	n, err = binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	if n > protocol.MaxEnvBytes {
		return errors.New("corrupt spool")
	}
	for ; n > 0; n-- {
		kv, err := readString(r)
		if err != nil {
			return err
		}
		k, v, _ := strings.Cut(kv, "=")
		if js.Env == nil {
			js.Env = map[string]string{}
		}
		js.Env[k] = v
	}
	flags, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	js.NoReplicate = flags&1 != 0
	js.Hold = flags&2 != 0
	p, err := binary.ReadVarint(r)
	if err != nil {
		return err
	}
	js.Priority = int(p)
	if flags&4 != 0 {
		res, err := readString(r)
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(res), &js.Resources); err != nil {
			return errors.New("corrupt spool")
		}
	}
	return nil
}
