// Package batchfail says what a failed metaqueue batch means: whether
// the disk is full, and the answer the batch's calls get. The core rolls
// the batch back and reloads; this is only the classification, so it
// holds no state.
package batchfail

import (
	"errors"

	"github.com/mq-hpc/mq/protocol"
)

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
