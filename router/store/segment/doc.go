// Package segment is an append-only log of entries kept in segment files:
// the on-disk message log that paged queues, Raft-replicated quorum queues
// and streams sit on. The store keeps each durable queue's message bodies
// in one (router/store/bodies.go, the queue logs), and the router writes
// the transient messages a queue pages behind its window to another
// (router/spill.go, Options.NoSync).
//
// # Model
//
// A Log is one directory. Entries get consecutive indices from 1 (or from
// the index a TruncatePrefix past the end chose). Entries are released
// three ways: TruncatePrefix (everything below an index: a queue's head
// settled in order, a Raft log compacted behind a snapshot, a stream's
// retention), Settle (a range in the middle: a non-contiguous
// acknowledgement, an expiry, a dead-letter move of a middle message), and
// TruncateSuffix (everything from an index on: a Raft follower's
// conflicting tail, whose indices are then appended anew).
//
// # Files
//
// Segment files are named by their first index (%020d.seg): a 32-byte
// header (magic, base index, CRC-32C), then one frame per entry (payload
// length, CRC-32C of length, index and payload, the index, the payload),
// and, once a newer segment exists, a 32-byte footer (last index, entry
// count, CRC-32C). The active segment is sealed when it reaches
// Options.SegmentSize (64 MiB by default; a batch is never split). The
// state file holds what was released (the head and the spans settled out of
// order) as checksummed records, rewritten as one checkpoint when it grows
// to four times the size a checkpoint would have; see state.go.
//
// # Durability
//
// Append writes a batch with one write call and returns its first index at
// once; the entries are readable immediately. Its callback runs when they
// are durable: one syncer goroutine fsyncs the active segment, then (when
// files were created or removed) the directory, then the state file, and
// calls back every operation submitted before it started, so concurrent
// appends and releases share one fsync (group commit, no timer). Because
// segments are synced before the state file, a release never becomes
// durable before the entries it releases; releases of entries a crash lost
// are dropped at open with a suffix record, so they cannot apply to the
// entries later appended at those indices. Segment files emptied by
// releases are deleted only after the release is durable, so a crash
// brings back no released entry. TruncateSuffix returns when the cut is
// durable.
//
// A failed fsync marks the log failed (ErrFailed): the kernel may have
// dropped the pages, so only a reopen, which reads the files back, says
// what is on disk. A write refused for lack of space (ENOSPC, EDQUOT) is
// not a failure: the partial frame is cut off again, the call returns an
// error wrapping storeerr.ErrDiskFull, nothing was appended, and the next
// append succeeds once there is room.
//
// # Recovery and damage
//
// Open reads the state file, each segment's header and footer, and scans
// only the last segment (at most one segment's bytes) to find where it
// ends, so its time does not grow with the entries stored (figures in the
// benchmark BenchmarkOpen). A damaged frame at the end of the last segment
// with no valid frame after it is a torn write that was never synced: it
// is cut and logged. Any other damage is kept and reported: because every
// frame carries its index, the scanner resynchronises on the next valid
// frame and knows exactly which indices it lost, and the reader returns a
// *CorruptError (errors.Is storeerr.ErrCorrupt) naming them, then goes on
// with the next entry. A damaged state file refuses to open (wrapping
// storeerr.ErrCorrupt): losing a release would resurrect settled messages.
// Damage in the very last frame cannot be told from a torn write.
//
// # Reading
//
// A Reader has its own file handle and read-ahead buffer (Options.ReadAhead,
// 256 KiB): one read call brings many entries, and Next returns a slice of
// that buffer, so the hot path makes no system call and no allocation per
// entry. Readers skip released entries and follow appends (io.EOF when
// caught up). Positioning uses a sparse offset index per segment (every
// 64th entry; built while appending, scanning at open, or reading), at
// most 63 frames from any index. Many readers can read at different
// positions: queue consumers, a stream's readers, a Raft leader's
// followers.
//
// # Memory
//
// The log keeps, per segment, a few counters and the sparse index (1/8 byte
// per entry), and one 16-byte span per run of entries settled out of order.
// Spans merge when they touch and are dropped when the head passes them,
// so there are never more spans than held entries, whatever went through.
//
// # The queue index on top (the plan for paged queues)
//
// A queue will keep in memory only a head window of messages with their
// bodies (what its consumers' credit will take next, bounded in bytes) and,
// for every other message, an index entry in pages of 256 consecutive log
// indices. A page has a header (base index, the minimum deadline and the
// total bytes of its live entries, a live count: about 32 bytes, 1/8 byte
// per message) and per message 8 bytes: its size (4) and its deadline as
// milliseconds after the page's first enqueue time (4, 0 for none). The log
// index is the page base plus the position, so no offset is stored; the
// file offset comes from the log's sparse index. A settled message is a
// zero size in its page and a span in the log. Priorities cost nothing per
// message: a queue with priorities keeps one page list per level, each
// over its own log. Expiry at the deadline in any position needs no body:
// pages sit in a heap by minimum deadline, and an expired page is scanned in
// memory; max-length-bytes uses the page totals; a dead-letter move reads
// the body once (Get, or the head reader) and settles the index. That is
// 8 bytes + 1/8 (page header) + 1/8 (sparse index) per message, and at worst
// 16 more for a span when every other message was settled: under 25 bytes,
// against the 40 allowed, and nothing that grows with messages passed.
//
// # Raft
//
// The API is the shape a Raft library's log storage needs, with the
// library's entry (term, type, data) encoded as the payload:
//
//   - hashicorp/raft LogStore: FirstIndex and LastIndex map directly (an
//     empty log reports 0 to that library); GetLog is Get and a decode;
//     StoreLogs is one Append of the encoded batch, waiting for its
//     callback (the library expects it durable on return); DeleteRange(min,
//     max) is TruncatePrefix(max+1) when min is the first index (compaction
//     after a snapshot) and TruncateSuffix(min) when max is the last index
//     (a conflicting tail).
//   - etcd/raft Storage: Entries(lo, hi, maxSize) is Read(lo, hi,
//     maxSize, ...); Term(i) decodes entry i (an adapter caches the terms
//     of the tail); FirstIndex/LastIndex map directly. On each Ready the
//     node first calls TruncateSuffix(first new index) if it is at or below
//     LastIndex, then Append, and waits for the callback when MustSync
//     before sending; after applying a snapshot at index s it calls
//     TruncatePrefix(s+1), which also empties a log that is behind it.
//
// Snapshots themselves (the state machine's) and the hard state (term,
// vote, commit) are kept by the caller in the metadata store, not here.
//
// # Streams
//
// A stream is the same log with readers at client-chosen offsets (indices),
// retention by TruncatePrefix on age or size (whole segments go), and no
// Settle.
package segment
