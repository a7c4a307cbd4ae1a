// Package storetest holds the fault injectors the store's and the router's
// tests share: a full disk for Pebble's error-injecting file system, a
// log handler that counts records, and the start of a crash test's child process.
package storetest

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// FullDisk is an in-memory file system whose disk fills up when its
// injector is switched on (full.On.Store(true)), and a log handler that
// counts what the store logs about it: what the disk-full tests of the
// store and of the router open a Pebble store with.
func FullDisk() (fs vfs.FS, full *TablesFull, lines *LineCounter) {
	full, lines = &TablesFull{}, &LineCounter{}
	return errorfs.Wrap(vfs.NewMem(), full), full, lines
}

// TablesFull fails the creation of and writes to tables with ENOSPC while On,
// as a full disk does: the WAL still has room (Pebble preallocates it), so
// commits go on until the memtables fill up, and every flush fails. Wrap a
// file system with errorfs.Wrap(fs, &TablesFull{}).
type TablesFull struct {
	On       atomic.Bool
	Injected atomic.Int64 // errors returned
}

func (d *TablesFull) String() string { return "TablesFull" }

// MaybeError implements errorfs.Injector.
func (d *TablesFull) MaybeError(op errorfs.Op) error {
	if !d.On.Load() || !strings.HasSuffix(op.Path, ".sst") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		d.Injected.Add(1)
		return syscall.ENOSPC
	}
	return nil
}

// LineCounter is a slog.Handler that counts the records it is given.
type LineCounter struct{ N atomic.Int64 }

func (h *LineCounter) Enabled(context.Context, slog.Level) bool  { return true }
func (h *LineCounter) Handle(context.Context, slog.Record) error { h.N.Add(1); return nil }
func (h *LineCounter) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *LineCounter) WithGroup(string) slog.Handler             { return h }
