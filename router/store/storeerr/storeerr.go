// Package storeerr holds the errors that the message store and the segment
// logs beneath it share. It is a leaf so that the store can keep queue
// bodies in segment logs while the segment package reports its damage and
// full disks with the same values (package store re-exports both).
package storeerr

import "errors"

var (
	// ErrCorrupt: data failed its checksum or could not be decoded.
	ErrCorrupt = errors.New("store: corrupt")
	// ErrDiskFull wraps failures caused by a full disk (ENOSPC, EDQUOT).
	ErrDiskFull = errors.New("store: disk full")
)
