package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// runSlowFrames opens n connections that each announce a frame of claim
// bytes (after open, with withOpen) and then send nothing.
func runSlowFrames(addr string, pid, n int, claim uint32, withOpen bool, settle time.Duration) error {
	before, err := status(pid, "VmRSS:")
	if err != nil {
		return err
	}
	dataBefore, err := status(pid, "VmData:")
	if err != nil {
		return err
	}
	held := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	hdr := binary.BigEndian.AppendUint32(nil, claim)
	hdr = append(hdr, 2, amqp10.FrameTypeAMQP, 0, 0)
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		held = append(held, c)
		if _, err := c.Write(amqp10.ProtoHeaderAMQP[:]); err != nil {
			return err
		}
		if withOpen {
			open := amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0,
				&amqp10.Open{ContainerID: "epitaph-probe", MaxFrameSize: 1 << 20, ChannelMax: 1}, nil)
			if _, err := c.Write(open); err != nil {
				return err
			}
			// The header and the broker's open: read them, so the broker
			// has processed our open before the frame header arrives.
			if err := readHeaderAndFrame(c); err != nil {
				return fmt.Errorf("connection %d: %w", i, err)
			}
		}
		if _, err := c.Write(hdr); err != nil {
			return err
		}
	}
	time.Sleep(settle) // the broker reads what was sent; nothing to poll for from outside
	after, err := status(pid, "VmRSS:")
	if err != nil {
		return err
	}
	dataAfter, err := status(pid, "VmData:")
	if err != nil {
		return err
	}
	// VmData counts heap the runtime mapped for allocations even where no
	// page was written yet (a claimed frame body nobody has sent).
	fmt.Printf("connections %d, claim %d bytes, open %v: broker VmRSS %d MB -> %d MB (%+d MB), VmData %d MB -> %d MB (%+d MB)\n",
		n, claim, withOpen, before>>20, after>>20, (after-before)>>20, dataBefore>>20, dataAfter>>20, (dataAfter-dataBefore)>>20)
	return nil
}

// warmUp has n connections each send a whole frame of size bytes after
// open; its body is no performative, so the broker closes them.
func warmUp(addr string, n int, size uint32) error {
	frame := binary.BigEndian.AppendUint32(nil, size)
	frame = append(frame, 2, amqp10.FrameTypeAMQP, 0, 0)
	frame = append(frame, make([]byte, size-8)...)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		conns = append(conns, c)
		open := amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0,
			&amqp10.Open{ContainerID: "epitaph-probe", MaxFrameSize: 1 << 20, ChannelMax: 1}, nil)
		if _, err := c.Write(append(amqp10.ProtoHeaderAMQP[:], open...)); err != nil {
			return err
		}
		if err := readHeaderAndFrame(c); err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		if _, err := c.Write(frame); err != nil {
			return err
		}
	}
	return nil
}

func readHeaderAndFrame(c net.Conn) error {
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	var h [8]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(h[:]))-8)
	return err
}

// status is a "key: N kB" line of /proc/pid/status, in bytes.
func status(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}
