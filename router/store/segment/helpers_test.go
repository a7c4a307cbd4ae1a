package segment

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/epitaph-mq/epitaph/router/store/storeerr"
)

func openT(t *testing.T, dir string, opt Options) *Log {
	t.Helper()
	l, err := Open(dir, opt)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func payload(i uint64) []byte {
	return fmt.Appendf(nil, "entry-%d-%s", i, string(make([]byte, i%37)))
}

// filledT opens a log in a new directory and appends n entries, batch at
// a time.
func filledT(t *testing.T, opt Options, n, batch int) (string, Options, *Log) {
	t.Helper()
	dir := t.TempDir()
	l := openT(t, dir, opt)
	appendN(t, l, n, batch)
	return dir, opt, l
}

// appendN appends n entries one batch at a time (batch entries per call)
// and waits for them to be durable.
func appendN(t *testing.T, l *Log, n, batch int) {
	t.Helper()
	for done := 0; done < n; {
		k := min(batch, n-done)
		next := l.LastIndex() + 1
		b := make([][]byte, k)
		for j := range b {
			b[j] = payload(next + uint64(j))
		}
		first, err := l.Append(b, nil)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		if first != next {
			t.Fatalf("append got index %d, want %d", first, next)
		}
		done += k
	}
	if err := l.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// readAll reads the log from its first index, returning the indices read
// and the corruption errors met.
func readAll(t *testing.T, l *Log) (idx []uint64, corrupt []*CorruptError) {
	t.Helper()
	r := l.NewReader(l.FirstIndex())
	defer r.Close()
	for {
		i, data, err := r.Next()
		if err == io.EOF {
			return idx, corrupt
		}
		var ce *CorruptError
		if errors.As(err, &ce) {
			corrupt = append(corrupt, ce)
			continue
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if want := payload(i); string(data) != string(want) {
			t.Fatalf("entry %d = %q, want %q", i, data, want)
		}
		idx = append(idx, i)
	}
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// faultFS is the real file system with a byte quota (a small disk: a
// write past it is cut short with ENOSPC, as the kernel does) and an
// optional gate that holds fsyncs of segment files.
type faultFS struct {
	OSFS
	quota   atomic.Int64 // bytes that may still be written; < 0: unlimited
	syncs   atomic.Int64 // fsyncs of segment files
	reads   atomic.Int64 // ReadAt calls
	readN   atomic.Int64 // bytes read
	mu      sync.Mutex
	gate    chan struct{} // when non-nil, a segment fsync waits for it
	entered chan struct{} // told when a gated fsync starts
}

func newFaultFS() *faultFS {
	f := &faultFS{}
	f.quota.Store(-1)
	return f
}

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&os.O_CREATE != 0 && fs.quota.Load() == 0 {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, fs: fs, seg: filepath.Ext(name) == ".seg"}, nil
}

type faultFile struct {
	*os.File
	fs  *faultFS
	seg bool
}

func (f *faultFile) Write(b []byte) (int, error) {
	for {
		q := f.fs.quota.Load()
		if q < 0 {
			return f.File.Write(b)
		}
		n := int(min(q, int64(len(b))))
		if !f.fs.quota.CompareAndSwap(q, q-int64(n)) {
			continue
		}
		w, err := f.File.Write(b[:n])
		if err == nil && n < len(b) {
			err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return w, err
	}
}

func (f *faultFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	f.fs.reads.Add(1)
	f.fs.readN.Add(int64(n))
	return n, err
}

func (f *faultFile) Sync() error {
	if f.seg {
		f.fs.syncs.Add(1)
		f.fs.mu.Lock()
		gate, entered := f.fs.gate, f.fs.entered
		f.fs.mu.Unlock()
		if gate != nil {
			entered <- struct{}{}
			<-gate
		}
	}
	return f.File.Sync()
}

func errCorruptSentinel() error { return storeerr.ErrCorrupt }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
