// Command epitaph runs the epitaph AMQP 1.0 broker.
//
// Configuration comes from flags, EPITAPH_* environment variables and an
// optional YAML file (--config); see package config and `epitaph --help`.
//
// Once the listeners are bound, epitaph prints one line per listener to
// stdout, in this order and only for those that are on,
//
//	amqp listening on HOST:PORT
//	amqps listening on HOST:PORT
//	http listening on HOST:PORT    (https with --http-tls)
//
// so that scripts and tests started with --listen 127.0.0.1:0 can learn the
// port. Logs go to stderr. SIGHUP reloads the TLS certificate, key and CA
// files. SIGINT or SIGTERM closes every connection with
// amqp:connection:forced and exits 0; any start-up error exits 1 and --help
// exits 0. This is the only place in the module that calls os.Exit.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, so that every deferred call runs first.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprintf(stdout, "Usage: epitaph [flags]\n\nFlags (each also settable as EPITAPH_<NAME> or in the --config YAML file):\n%s", config.Usage())
		return 0
	}
	if err != nil {
		// No logger yet: the log format itself may be what is wrong.
		slog.New(slog.NewTextHandler(stderr, nil)).Error("invalid configuration", "err", err)
		fmt.Fprintf(stderr, "Run 'epitaph --help' for usage.\n")
		return 1
	}
	log := newLogger(cfg, stderr)
	if err := serve(cfg, log, stdout); err != nil {
		log.Error("epitaph failed", "err", err)
		return 1
	}
	return 0
}

// serve starts the broker, announces its address on stdout, and blocks until
// SIGINT or SIGTERM, then closes it.
func serve(cfg *config.Config, log *slog.Logger, stdout io.Writer) error {
	opts := options(cfg, log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer startHeapFloor(heapFloorBytes(cfg), log)()
	// SIGHUP reloads the TLS certificate: new handshakes use it, open
	// connections keep theirs. Registered before the listeners open, so
	// that an early SIGHUP never kills the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	b, err := epitaph.Start(opts)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	log.Info("epitaph started", "listen", b.Addr(), "tls_listen", b.TLSAddr(), "anonymous", cfg.Anonymous,
		"auto_create_queues", cfg.AutoCreateQueues, "definitions", cfg.DefinitionsFile)
	if err := announce(stdout, b, cfg.HTTPTLS); err != nil {
		_ = b.Close()
		return fmt.Errorf("announce address: %w", err)
	}

	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-hup:
			if err := b.ReloadTLS(); err != nil {
				log.Error("SIGHUP: TLS certificate not reloaded", "err", err)
			}
		}
	}
	stop() // a second signal now kills the process the default way
	log.Info("shutting down", "cause", context.Cause(ctx))
	if err := b.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	log.Info("epitaph stopped")
	return nil
}

// announce prints the bound addresses, one line each: "amqp listening on",
// "amqps listening on", then "http listening on" or "https listening on".
func announce(w io.Writer, b *epitaph.Broker, httpTLS bool) error {
	lines := []struct {
		what string
		addr net.Addr
	}{{"amqp", b.Addr()}, {"amqps", b.TLSAddr()}, {"http", b.HTTPAddr()}}
	if httpTLS {
		lines[2].what = "https"
	}
	for _, l := range lines {
		if l.addr == nil {
			continue
		}
		if _, err := fmt.Fprintf(w, "%s listening on %s\n", l.what, l.addr); err != nil {
			return err
		}
	}
	return nil
}

// options is the embedding API's defaults with the loaded configuration:
// epitaph.Options embeds config.Config, so nothing is mapped field by field.
func options(cfg *config.Config, log *slog.Logger) epitaph.Options {
	opts := epitaph.DefaultOptions()
	opts.Config = *cfg
	opts.Logger = log
	return opts
}

// heapFloorBytes is the configured GC heap floor, capped at half the memory
// high watermark so that garbage alone never raises the memory alarm.
func heapFloorBytes(cfg *config.Config) uint64 {
	if cfg.MemoryHighWatermark > 0 {
		return min(cfg.GCHeapFloor, cfg.MemoryHighWatermark/2)
	}
	return cfg.GCHeapFloor
}

// newLogger builds the process logger: text or JSON on stderr at the
// configured level.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	if cfg.LogFormat == config.LogFormatJSON {
		return slog.New(slog.NewJSONHandler(w, hopts))
	}
	return slog.New(slog.NewTextHandler(w, hopts))
}
