// Package batchfail says what a failed metaqueue batch means: whether a
// module's error is the database's (Store), whether the disk is full, and
// the answer the batch's calls get. The core rolls the batch back and
// reloads; this is only the classification, so it holds no state.
package batchfail

import (
	"errors"

	"github.com/mq-hpc/mq/protocol"
)

// A Store error is a failure of the database, not of the request: the
// core rolls its batch back. A module returns its refusals as
// *protocol.Error and the database's failures wrapped in Store.
type Store struct{ Err error }

func (e Store) Error() string { return e.Err.Error() }
func (e Store) Unwrap() error { return e.Err }

// IsStore says whether err is the database's failure.
func IsStore(err error) bool {
	var se Store
	return errors.As(err, &se)
}

// IsFull says whether err is SQLite's "database or disk is full".
func IsFull(err error) bool {
	var ce interface{ Code() int }
	return errors.As(err, &ce) && ce.Code()&0xff == 13 // SQLITE_FULL
}

// Answer is the error every call of a batch that failed with cause is
// answered with. A full disk says what to do: free space on the
// filesystem of dir (the database's) and try again; nothing was changed.
func Answer(cause error, dir string) error {
	if IsFull(cause) {
		return protocol.Errorf(protocol.CodeInternal, "metaqueue storage failure: %v: nothing was changed; free space on the filesystem of %s and try again", cause, dir)
	}
	return protocol.Errorf(protocol.CodeInternal, "metaqueue storage failure: %v", cause)
}
