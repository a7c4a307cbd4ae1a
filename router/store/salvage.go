package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// salvageHint tells an operator how to proceed from a refused start.
const salvageHint = "; the store was not opened, so nothing was changed. Restore the data directory from a backup, " +
	"or open it with recovery mode salvage (epitaph: --store-recovery salvage, or store-recovery: salvage), " +
	"which keeps what is readable, copies the damaged files into a salvaged-<time> directory inside the data directory " +
	"and logs what it drops"

// openFirst opens the store at start-up: checks the logs Pebble reads
// leniently, opens, and in salvage mode repairs what it can.
func (p *Pebble) openFirst() error {
	fs, dir := p.opts.FS, p.dir
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	salvage := p.opts.Recovery == RecoverySalvage
	damage, err := checkLogs(fs, dir, false)
	if err != nil {
		return err
	}
	if len(damage) > 0 {
		if !salvage {
			return corruptLogsError(damage)
		}
		if err := p.salvageLogs(damage); err != nil {
			return err
		}
	}
	err = p.reopen(false)
	if err != nil && pebble.IsCorruptionError(err) && salvage {
		// An older WAL, read strictly by Pebble, is damaged: cut every damaged
		// log at its last whole record.
		if damage, cerr := checkLogs(fs, dir, true); cerr != nil {
			return cerr
		} else if len(damage) > 0 {
			if err := p.salvageLogs(damage); err != nil {
				return err
			}
			err = p.reopen(false)
		}
	}
	if err != nil {
		if pebble.IsCorruptionError(err) {
			return fmt.Errorf("%w: opening %s: %w%s", ErrCorrupt, dir, err, salvageHint)
		}
		return err
	}
	if salvage {
		if err := p.salvageTables(); err != nil {
			p.breakDB()
			return err
		}
	}
	return nil
}

func corruptLogsError(damage []logDamage) error {
	var parts []string
	for _, d := range damage {
		parts = append(parts, d.describe())
	}
	return fmt.Errorf("%w: %s; opening it would silently drop the records after the damage%s",
		ErrCorrupt, strings.Join(parts, "; "), salvageHint)
}

func (p *Pebble) logger() *slog.Logger {
	if p.opts.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.opts.Logger
}

// keepCopies makes the salvage directory and keeps every file of the store
// there: hard links (cheap; files Pebble deletes later stay reachable), and
// real copies of the files named in cut, which are about to be changed in
// place.
func (p *Pebble) keepCopies(cut map[string]bool) (string, error) {
	fs, dir := p.opts.FS, p.dir
	sd, err := salvageDir(fs, dir)
	if err != nil {
		return "", err
	}
	names, err := fs.List(dir)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		src := fs.PathJoin(dir, n)
		if n == "LOCK" || strings.HasPrefix(n, "salvaged-") {
			continue
		}
		if st, err := fs.Stat(src); err != nil || st.IsDir() {
			continue
		}
		dst := fs.PathJoin(sd, n)
		if !cut[n] && fs.Link(src, dst) == nil {
			continue
		}
		if err := copyFile(fs, src, dst); err != nil {
			return "", fmt.Errorf("store: keeping a copy of %s before salvage: %w", n, err)
		}
	}
	return sd, nil
}

// salvageLogs cuts each damaged log at its last whole record before the
// damage, after keeping copies.
func (p *Pebble) salvageLogs(damage []logDamage) error {
	cut := map[string]bool{}
	for _, d := range damage {
		cut[d.name] = true
	}
	sd, err := p.keepCopies(cut)
	if err != nil {
		return err
	}
	for _, d := range damage {
		if err := truncateLog(p.opts.FS, p.opts.FS.PathJoin(p.dir, d.name), d.check.wholeEnd); err != nil {
			return fmt.Errorf("store: salvage of %s: %w", d.name, err)
		}
		dropped := uint64(d.check.recordsAfter) + 1 // and the damaged record itself
		p.salvaged.Add(dropped)
		what := "WAL records (batches of messages and settlements)"
		if !d.wal {
			what = "MANIFEST version edits (tables added after the damage are no longer part of the store)"
		}
		p.logger().Warn("store salvage: log cut at the damage, later records dropped",
			"file", d.name, "damaged_at", d.check.bad, "cut_at", d.check.wholeEnd, "size", d.size,
			"dropped", dropped, "dropped_kind", what, "copies", sd)
	}
	return nil
}

// salvageTables reads every key; each table found with a corrupt block has
// its key range removed (Excise), after the store's files are kept.
func (p *Pebble) salvageTables() error {
	kept := ""
	for range 1000 {
		err := safeVerify(p.db)
		if err == nil {
			return nil
		}
		if !pebble.IsCorruptionError(err) {
			return err
		}
		p.corruptMu.Lock()
		info := p.lastCorrupt
		p.lastCorrupt = nil
		p.corruptMu.Unlock()
		if info == nil {
			return fmt.Errorf("%w: %w (salvage found no table to drop)", ErrCorrupt, err)
		}
		if kept == "" {
			if kept, err = p.keepCopies(nil); err != nil {
				return err
			}
		}
		span := pebble.KeyRange{Start: info.Bounds.Start, End: info.Bounds.End.Key}
		if info.Bounds.End.Kind == 1 { // inclusive: the next key up
			span.End = append(append([]byte{}, span.End...), 0)
		}
		entries := p.tableEntries(info.Path)
		if err := excise(p.db, span); err != nil {
			return fmt.Errorf("%w: salvage of %s: %w", ErrCorrupt, info.Path, err)
		}
		p.salvaged.Add(entries)
		p.logger().Warn("store salvage: table with a corrupt block dropped (every key in its range)",
			"file", info.Path, "from", fmt.Sprintf("%q", span.Start), "to", fmt.Sprintf("%q", span.End),
			"dropped_entries", entries, "copies", kept)
	}
	return fmt.Errorf("%w: salvage gave up after dropping 1000 tables", ErrCorrupt)
}

// tableEntries is the number of entries of the table at path (0 if unknown).
func (p *Pebble) tableEntries(path string) uint64 {
	levels, err := p.db.SSTables(pebble.WithProperties())
	if err != nil {
		return 0
	}
	base := vfs.Default.PathBase(path)
	for _, l := range levels {
		for _, t := range l {
			if fmt.Sprintf("%06d.sst", uint64(t.FileNum)) == base && t.Properties != nil {
				return t.Properties.NumEntries
			}
		}
	}
	return 0
}

func excise(db *pebble.DB, span pebble.KeyRange) (err error) {
	defer recoverPanic(&err)
	return db.Excise(context.Background(), span)
}

func safeVerify(db *pebble.DB) (err error) {
	defer recoverPanic(&err)
	return verify(db)
}

// recoverPanic turns a panic from Pebble into an error, so that no damaged
// file ends the process: a corruption wraps ErrCorrupt.
func recoverPanic(err *error) {
	r := recover()
	if r == nil {
		return
	}
	e, ok := r.(error)
	if !ok {
		e = fmt.Errorf("%v", r)
	}
	if pebble.IsCorruptionError(e) {
		*err = fmt.Errorf("%w: pebble panicked: %w", ErrCorrupt, e)
		return
	}
	*err = fmt.Errorf("store: pebble panicked: %w", e)
}

// readErr classifies an error of a read: corruption wraps ErrCorrupt.
func readErr(err error) error {
	if err != nil && pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}
