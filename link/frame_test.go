package link

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// A frame header claiming 128 KiB followed by a few bytes costs memory in
// proportion to the bytes that arrived, not to the claim.
func TestReadFrameAllocatesAsBytesArrive(t *testing.T) {
	const claim = 128 << 10
	in := binary.BigEndian.AppendUint32(nil, claim)
	in = append(in, 2, amqp10.FrameTypeAMQP, 0, 0)
	in = append(in, make([]byte, 100)...)
	var before, after runtime.MemStats
	const rounds = 20
	runtime.ReadMemStats(&before)
	for range rounds {
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		_, _, err := readFrame(r, 1<<20)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
		}
	}
	runtime.ReadMemStats(&after)
	if perRound := (after.TotalAlloc - before.TotalAlloc) / rounds; perRound > 8<<10 {
		t.Errorf("a truncated frame claiming %d bytes allocated %d bytes", claim, perRound)
	}
}

// Frames arriving in small pieces are read whole, whatever their size.
func TestReadFrameInPieces(t *testing.T) {
	for _, size := range []int{8, 9, 4096, 4097, 70000, 131072} {
		body := make([]byte, size-8)
		for i := range body {
			body[i] = byte(i)
		}
		in := binary.BigEndian.AppendUint32(nil, uint32(size))
		in = append(in, 2, amqp10.FrameTypeAMQP, 0, 7)
		in = append(in, body...)
		r := bufio.NewReaderSize(smallReads{bytes.NewReader(in)}, 16)
		fh, got, err := readFrame(r, 1<<20)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if fh.Channel != 7 || !bytes.Equal(got, body) || cap(got) != len(body) {
			t.Fatalf("size %d: channel %d, body equal %v, cap %d", size, fh.Channel, bytes.Equal(got, body), cap(got))
		}
	}
}

// smallReads returns at most 1000 bytes per Read, as a slow socket does.
type smallReads struct{ r io.Reader }

func (h smallReads) Read(p []byte) (int, error) {
	return h.r.Read(p[:min(len(p), 1000)])
}
