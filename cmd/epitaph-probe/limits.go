package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// runLimits runs the links, unfinished or unsettled scenario.
func runLimits(addr string, pid int, scenario string, conns, n int, settle time.Duration) error {
	before, err := status(pid, "VmRSS:")
	if err != nil {
		return err
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	dial := func() (*bufio.Writer, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		held = append(held, c)
		go func() { _, _ = io.Copy(io.Discard, c) }()
		w := bufio.NewWriterSize(c, 1<<20)
		_, _ = w.Write(amqp10.ProtoHeaderAMQP[:])
		write(w, 0, &amqp10.Open{ContainerID: "epitaph-probe", MaxFrameSize: 1 << 20, ChannelMax: 65535}, nil)
		return w, nil
	}
	switch scenario {
	case "links":
		for range conns {
			w, err := dial()
			if err != nil {
				return err
			}
			for ch := range uint16(256) {
				write(w, ch, &amqp10.Begin{IncomingWindow: 1000, OutgoingWindow: 1000, HandleMax: 1 << 20}, nil)
				for h := range uint32(256) {
					write(w, ch, senderAttach(h, fmt.Sprintf("l-%d-%d", ch, h), "/exchanges/amq.direct/nowhere", false), nil)
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
	case "unfinished":
		w, err := dial()
		if err != nil {
			return err
		}
		write(w, 0, &amqp10.Begin{IncomingWindow: 1000, OutgoingWindow: 1 << 30, HandleMax: 255}, nil)
		const links, size, chunk = 40, 15 << 20, 64 << 10
		for h := range uint32(links) {
			write(w, 0, senderAttach(h, fmt.Sprintf("u-%d", h), "/exchanges/amq.direct/nowhere", false), nil)
		}
		payload := make([]byte, chunk)
		for h := range uint32(links) {
			for sent := 0; sent+chunk < size; sent += chunk {
				t := &amqp10.Transfer{Handle: h, More: true}
				if sent == 0 {
					t.DeliveryID, t.HasDeliveryID, t.DeliveryTag, t.HasMessageFormat = h, true, []byte{byte(h)}, true
				}
				write(w, 0, t, payload)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	case "unsettled":
		w, err := dial()
		if err != nil {
			return err
		}
		write(w, 0, &amqp10.Begin{IncomingWindow: 1000, OutgoingWindow: 1 << 30, HandleMax: 255}, nil)
		write(w, 0, senderAttach(0, "unsettled", "/exchanges/amq.direct/nowhere", true), nil)
		msg := []byte{0x00, 0x53, 0x75, 0xa0, 0x01, 'm'}
		for i := range uint32(n) {
			write(w, 0, &amqp10.Transfer{Handle: 0, DeliveryID: i, HasDeliveryID: true,
				DeliveryTag: []byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)}, HasMessageFormat: true}, msg)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown scenario %q", scenario)
	}
	time.Sleep(settle) // the broker works through what was written; nothing to poll from outside
	after, err := status(pid, "VmRSS:")
	if err != nil {
		return err
	}
	fmt.Printf("scenario %s: broker VmRSS %d MB -> %d MB (%+d MB)\n", scenario, before>>20, after>>20, (after-before)>>20)
	return nil
}

func senderAttach(h uint32, name, address string, second bool) *amqp10.Attach {
	a := &amqp10.Attach{Name: name, Handle: h, Role: amqp10.RoleSender,
		Source: &amqp10.Source{}, Target: &amqp10.Target{Address: address, HasAddress: true},
		InitialDeliveryCount: 0, HasInitialDeliveryCount: true}
	if second {
		a.RcvSettleMode, a.HasRcvSettleMode = amqp10.RcvSecond, true
	}
	return a
}

var frameBuf []byte

func write(w *bufio.Writer, ch uint16, p amqp10.Performative, payload []byte) {
	frameBuf = amqp10.AppendFrame(frameBuf[:0], amqp10.FrameTypeAMQP, ch, p, payload)
	_, _ = w.Write(frameBuf) // a write error shows at the next Flush
}
