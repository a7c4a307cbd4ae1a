// Command epitaph-null is the null broker: just enough AMQP 1.0 to take
// publishes and feed consumers from one in-memory FIFO (every address is
// that FIFO), with no routing, lookups or dead-lettering. It is the floor
// for this traffic on a machine; see package nullbroker.
//
//	epitaph-null --listen 127.0.0.1:0
//	epitaph-null -tcp-relay --listen 127.0.0.1:0
//
// prints "amqp listening on HOST:PORT" on stdout once bound, like epitaph,
// and exits 0 on SIGINT/SIGTERM.
//
// With -tcp-relay it speaks no AMQP: it pairs producer and consumer
// connections and relays raw bytes between them (see package tcprelay),
// the machine's floor under the null broker, driven by epitaph-perf
// -scenario tcp-latency. It prints the same line once bound.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-null/nullbroker"
	"github.com/epitaph-mq/epitaph/cmd/epitaph-null/tcprelay"
)

func main() {
	fs := flag.NewFlagSet("epitaph-null", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:5674", "address to listen on (port 0 picks one)")
	maxFrame := fs.Uint("max-frame-size", nullbroker.DefaultMaxFrameSize, "max-frame-size to advertise (publishers split larger messages)")
	relay := fs.Bool("tcp-relay", false, "speak no AMQP: pair connections that send 'P' (producer) or 'C' (consumer) first and relay the producer's bytes to the consumer (epitaph-perf -scenario tcp-latency)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	var s io.Closer
	var err error
	if *relay {
		s, err = tcprelay.Serve(*listen, os.Stdout, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	} else {
		s, err = nullbroker.Serve(*listen, uint32(*maxFrame), os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "epitaph-null:", err)
		os.Exit(1)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
	_ = s.Close()
}
