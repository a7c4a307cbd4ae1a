// Command epitaph-probe measures what a broker holds for state a client can
// pile up without sending anything useful, printing the broker process's
// resident memory (VmRSS of -pid) before and after:
//
//	-scenario slowframes  -conns connections each send the protocol header (and, with -open, an
//	                      open frame first) and an 8-byte frame header claiming -claim bytes,
//	                      then nothing; also prints VmData. With -warm, as many connections
//	                      first each send one whole (undecodable) frame of -claim bytes after
//	                      open and are closed, so the broker's heap is resident, as after
//	                      ordinary traffic: mapped memory never written does not count in RSS
//	-scenario links       -conns connections, each beginning 256 sessions of 256 links
//	-scenario unfinished  one connection, 40 links, each with an unfinished 15 MiB message
//	-scenario unsettled   one connection publishing -n unroutable rcv-settle-mode second
//	                      messages, never settling
//
// It writes without waiting for replies (what a client ignoring flow
// control does) and discards what the broker sends.
//
//	go run ./cmd/epitaph-probe -addr 127.0.0.1:5672 -pid $(pgrep -n epitaph) -scenario slowframes -conns 4000 -claim 65536
//	go run ./cmd/epitaph-probe -addr 127.0.0.1:5672 -pid $(pgrep -n epitaph) -scenario links -conns 10
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5672", "broker AMQP address")
	pid := flag.Int("pid", 0, "broker process id (for VmRSS)")
	scenario := flag.String("scenario", "slowframes", "slowframes, links, unfinished or unsettled")
	conns := flag.Int("conns", 0, "connections (slowframes: default 4000; links: default 10)")
	claim := flag.Uint("claim", 64<<10, "slowframes: frame size each connection's header claims, in bytes")
	withOpen := flag.Bool("open", false, "slowframes: exchange open before the frame header (no SASL)")
	warm := flag.Bool("warm", false, "slowframes: first make the broker's heap resident with whole frames")
	n := flag.Int("n", 3_000_000, "unsettled: publishes")
	settle := flag.Duration("settle", 3*time.Second, "wait after writing before reading the RSS again")
	flag.Parse()
	if err := run(*addr, *pid, *scenario, *conns, *claim, *withOpen, *warm, *n, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "epitaph-probe:", err)
		os.Exit(1)
	}
}

func run(addr string, pid int, scenario string, conns int, claim uint, withOpen, warm bool, n int, settle time.Duration) error {
	if scenario != "slowframes" {
		if conns == 0 {
			conns = 10
		}
		return runLimits(addr, pid, scenario, conns, n, settle)
	}
	if conns == 0 {
		conns = 4000
	}
	if warm {
		if err := warmUp(addr, conns, uint32(claim)); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		time.Sleep(2 * time.Second) // the broker closes them and collects; nothing to poll from outside
	}
	return runSlowFrames(addr, pid, conns, uint32(claim), withOpen, settle)
}
