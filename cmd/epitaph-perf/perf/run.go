package perf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is one run of epitaph-perf.
type Config struct {
	Engine    string // fast, goamqp, amqp091 or fast091 (tcp-latency: always tcp): the publishers' engine
	Scenario  string // throughput, deadletter, latency, tcp-latency, fill, consume, idle
	URL       string
	SASL      string
	Target    string // address senders publish to
	Source    string // address receivers consume from
	DLQSource string // deadletter: address of the dead-letter queue
	Size      int
	Duration  time.Duration // stop publishing after this (0: use Count)
	Count     uint64        // stop publishing after this many (0: use Duration)
	// SeqStart (fill): the first sequence number written into the bodies,
	// so that a second fill into a queue continues the first one's numbers.
	SeqStart   uint64
	Senders    int
	Receivers  int
	Window     int
	Credit     uint32
	CreditMode string  // half or exhausted
	Rate       float64 // latency, tcp-latency: messages per second (all senders together)
	Warmup     time.Duration
	BrokerPID  int
	Drain      bool          // fill: consume the messages after measuring
	Settle     time.Duration // fill, idle: wait before sampling RSS
	Timeout    time.Duration // overall bound for the run
	Progress   io.Writer     // progress lines (nil: none)
	Durable    bool          // header durable=true on every message
	// AckMultiple: fast091 consumers acknowledge with multiple=true, once
	// per batch of deliveries, instead of once per delivery.
	AckMultiple bool

	// Connections is how many idle connections the idle scenario opens
	// (default DefaultIdleConnections). Each begins one session and then
	// only sends keepalive frames; BrokerPID is required.
	Connections int

	// ConsumeEngine is the consumers' engine (default Engine), and
	// DLQEngine the dead-letter queue's consumer's (default ConsumeEngine):
	// publishing over one protocol and consuming over the other measures
	// the conversion between AMQP 0-9-1 and 1.0.
	ConsumeEngine string
	DLQEngine     string

	recordAfter *atomic.Int64 // latency samples count from this time (unix ns)
}

// Result is what a run measured. Rates are messages per second.
type Result struct {
	Engine     string `json:"engine"`
	Scenario   string `json:"scenario"`
	URL        string `json:"url"`
	Size       int    `json:"size"`
	Senders    int    `json:"senders"`
	Receivers  int    `json:"receivers"`
	Window     int    `json:"window"`
	Credit     uint32 `json:"credit"`
	CreditMode string `json:"credit_mode"`

	Sent       uint64  `json:"sent"`
	Received   uint64  `json:"received"`
	Elapsed    float64 `json:"elapsed_s"`
	Rate       float64 `json:"rate"`
	TargetRate float64 `json:"target_rate,omitempty"`

	PubAccepted uint64 `json:"publish_accepted"`
	PubRejected uint64 `json:"publish_rejected"`
	PubReleased uint64 `json:"publish_released"`
	PubOther    uint64 `json:"publish_other"`

	Lost         uint64 `json:"lost"`
	Duplicated   uint64 `json:"duplicated"`
	BeyondCredit uint64 `json:"beyond_credit"`
	Undecodable  uint64 `json:"undecodable"`
	// OutOfOrder (consume): deliveries whose sequence number is below one
	// delivered before them (one receiver on a FIFO queue filled by one
	// sender sees none).
	OutOfOrder uint64 `json:"out_of_order,omitempty"`

	LatP50  float64 `json:"latency_p50_ms,omitempty"`
	LatP90  float64 `json:"latency_p90_ms,omitempty"`
	LatP99  float64 `json:"latency_p99_ms,omitempty"`
	LatMax  float64 `json:"latency_max_ms,omitempty"`
	LatMean float64 `json:"latency_mean_ms,omitempty"`
	LatN    uint64  `json:"latency_samples,omitempty"`

	// Publish-confirm latency: send -> accepted disposition (from the
	// intended send time in fixed-rate runs).
	ConfP50  float64 `json:"confirm_p50_ms,omitempty"`
	ConfP90  float64 `json:"confirm_p90_ms,omitempty"`
	ConfP99  float64 `json:"confirm_p99_ms,omitempty"`
	ConfMax  float64 `json:"confirm_max_ms,omitempty"`
	ConfMean float64 `json:"confirm_mean_ms,omitempty"`
	ConfN    uint64  `json:"confirm_samples,omitempty"`

	Durable bool `json:"durable,omitempty"`
	// consume scenario: when the connection was up and when the first
	// delivery arrived (unix ns)
	ConnectedUnixNs     int64   `json:"connected_unix_ns,omitempty"`
	FirstDeliveryUnixNs int64   `json:"first_delivery_unix_ns,omitempty"`
	FirstDeliveryMs     float64 `json:"first_delivery_ms,omitempty"` // after the receiver was attached

	ClientCPUSeconds float64 `json:"client_cpu_s,omitempty"` // this process, over the same interval
	BrokerCPUSeconds float64 `json:"broker_cpu_s,omitempty"`
	BrokerCPUPerMsg  float64 `json:"broker_cpu_us_per_msg,omitempty"`
	BrokerRSSBefore  int64   `json:"broker_rss_before,omitempty"`
	BrokerRSSAfter   int64   `json:"broker_rss_after,omitempty"`
	BrokerRSSPerMsg  float64 `json:"broker_rss_per_msg,omitempty"`

	// idle scenario: connections asked for, opened (Elapsed is the time
	// to open them), failed to open, and found closed by the broker after
	// the RSS sample; keepalive frames sent; the broker's RSS growth per
	// open connection; whether it served a new connection after all closed.
	Connections         int     `json:"connections,omitempty"`
	ConnOpened          int     `json:"connections_opened,omitempty"`
	ConnFailed          int     `json:"connections_failed,omitempty"`
	ConnClosedByBroker  int     `json:"connections_closed_by_broker,omitempty"`
	ConnRate            float64 `json:"connections_per_s,omitempty"`
	KeepaliveFrames     uint64  `json:"keepalive_frames,omitempty"`
	BrokerRSSPerConn    float64 `json:"broker_rss_per_conn,omitempty"` // bytes
	BrokerRSSPerConnKiB float64 `json:"broker_rss_per_conn_kib,omitempty"`
	BrokerServesAfter   bool    `json:"broker_serves_after,omitempty"`

	Errors []string `json:"errors,omitempty"`

	// the consumers' and the dead-letter consumer's engines when they
	// differ from Engine
	ConsumeEngine string `json:"consume_engine,omitempty"`
	DLQEngine     string `json:"dlq_engine,omitempty"`
}

// Failed reports whether the run saw loss, duplicates, beyond-credit or
// undecodable deliveries, refused publishes, or errors.
func (r *Result) Failed() bool {
	return r.Lost+r.Duplicated+r.BeyondCredit+r.Undecodable+r.PubRejected+r.PubReleased+r.PubOther > 0 || len(r.Errors) > 0
}

type sender interface {
	Send(seq uint64, body []byte) error
	Wait(ctx context.Context) error
	Stats() SendStats
	Confirms() *Histogram
	Close() error
}

type receiver interface {
	Stats() RecvStats
	Close() error
}

func (c *Config) conn() ConnOptions {
	return ConnOptions{URL: c.URL, SASL: c.SASL, Credit: c.Credit, CreditMode: c.CreditMode, Window: c.Window,
		Durable: c.Durable, AckMultiple: c.AckMultiple, FromIntended: c.Rate > 0, RecordAfter: c.recordAfter}
}

func (c *Config) newSender(ctx context.Context) (sender, error) {
	switch c.Engine {
	case "goamqp":
		return newGoSender(ctx, c.conn(), c.Target)
	case "amqp091":
		return newAMQP091Sender(ctx, c.conn(), c.Target)
	case "fast091":
		return newFast091Sender(ctx, c.conn(), c.Target)
	case "tcp":
		return newTCPSender(ctx, c.URL)
	}
	return newFastSender(ctx, c.conn(), c.Target)
}

func (c *Config) newReceiver(ctx context.Context, addr string, onMsg func([]byte) bool) (receiver, error) {
	return c.newReceiverWith(ctx, c.ConsumeEngine, addr, onMsg)
}

// newReceiverWith starts a receiver with the given engine.
func (c *Config) newReceiverWith(ctx context.Context, engine, addr string, onMsg func([]byte) bool) (receiver, error) {
	switch engine {
	case "goamqp":
		return newGoReceiver(ctx, c.conn(), addr, c.Size, onMsg)
	case "amqp091":
		return newAMQP091Receiver(ctx, c.conn(), addr, c.Size, onMsg)
	case "fast091":
		return newFast091Receiver(ctx, c.conn(), addr, c.Size, onMsg)
	case "tcp":
		return newTCPReceiver(ctx, c.URL, c.Size, onMsg)
	}
	return newFastReceiver(ctx, c.conn(), addr, c.Size, onMsg)
}

// Run executes one scenario. A non-nil error means the run could not be
// carried out; a completed run with loss or duplicates returns a Result
// whose Failed is true.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Scenario == "idle" {
		if cfg.Timeout <= 0 {
			cfg.Timeout = 10 * time.Minute
		}
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		return runIdle(ctx, cfg)
	}
	if cfg.Size < 16 {
		return nil, errors.New("size must be at least 16 bytes (sequence number and send time)")
	}
	if cfg.Senders < 1 {
		cfg.Senders = 1
	}
	if cfg.Scenario == "tcp-latency" {
		// raw TCP through epitaph-null -tcp-relay: no AMQP, so no engine,
		// window, credit or header; each sender is paired with a receiver
		if cfg.Receivers < 1 {
			cfg.Receivers = cfg.Senders
		}
		if cfg.Receivers != cfg.Senders {
			return nil, errors.New("tcp-latency pairs one receiver with each sender: give -receivers equal to -senders")
		}
		if _, err := tcpHost(cfg.URL); err != nil {
			return nil, err
		}
		cfg.Engine, cfg.Window, cfg.Credit, cfg.CreditMode, cfg.Durable = "tcp", 0, 0, "", false
		cfg.ConsumeEngine, cfg.DLQEngine = "tcp", "tcp"
	} else {
		if cfg.ConsumeEngine == "" {
			cfg.ConsumeEngine = cfg.Engine
		}
		if cfg.DLQEngine == "" {
			cfg.DLQEngine = cfg.ConsumeEngine
		}
		for _, e := range []string{cfg.Engine, cfg.ConsumeEngine, cfg.DLQEngine} {
			if e != "fast" && e != "goamqp" && e != "amqp091" && e != "fast091" {
				return nil, fmt.Errorf("unknown engine %q (fast, goamqp, amqp091, fast091)", e)
			}
		}
	}
	switch cfg.Scenario {
	case "throughput", "deadletter", "latency", "tcp-latency":
		if cfg.Receivers < 1 {
			cfg.Receivers = 1
		}
	case "fill":
		cfg.Receivers = 0
	case "consume":
		if cfg.Count == 0 {
			return nil, errors.New("consume needs -count (the messages 0..count-1 a fill left in the queue)")
		}
	default:
		return nil, fmt.Errorf("unknown scenario %q (throughput, deadletter, latency, tcp-latency, fill, consume, idle)", cfg.Scenario)
	}
	if (cfg.Scenario == "latency" || cfg.Scenario == "tcp-latency") && cfg.Rate <= 0 {
		return nil, fmt.Errorf("%s needs -rate > 0", cfg.Scenario)
	}
	if cfg.Duration <= 0 && cfg.Count == 0 {
		return nil, errors.New("give -duration or -count")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.CreditMode == "" && cfg.Engine != "tcp" {
		cfg.CreditMode = "half"
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// no samples until the run starts (then start + warmup)
	cfg.recordAfter = &atomic.Int64{}
	cfg.recordAfter.Store(math.MaxInt64)

	res := &Result{Engine: cfg.Engine, Scenario: cfg.Scenario, URL: cfg.URL, Size: cfg.Size, Senders: cfg.Senders,
		Receivers: cfg.Receivers, Window: cfg.Window, Credit: cfg.Credit, CreditMode: cfg.CreditMode, TargetRate: cfg.Rate, Durable: cfg.Durable}
	if cfg.ConsumeEngine != cfg.Engine {
		res.ConsumeEngine = cfg.ConsumeEngine
	}
	if cfg.Scenario == "deadletter" && cfg.DLQEngine != cfg.Engine {
		res.DLQEngine = cfg.DLQEngine
	}
	if cfg.Scenario == "consume" {
		res.Senders, res.Receivers = 0, 1
		return consume(ctx, cfg, res)
	}

	limit := cfg.Count
	track := NewSeqTracker(0)    // deliveries on Source (or the DLQ)
	rejTrack := NewSeqTracker(0) // deadletter: deliveries on the work queue
	var delivered atomic.Uint64
	var lastRecv atomic.Int64
	var start time.Time
	var startNs atomic.Int64
	hists := make([]*Histogram, 0)
	var histMu sync.Mutex

	newHandler := func(reject bool) func([]byte) bool {
		h := &Histogram{}
		histMu.Lock()
		hists = append(hists, h)
		histMu.Unlock()
		var hmu sync.Mutex
		return func(body []byte) bool {
			seq := binary.BigEndian.Uint64(body)
			if reject {
				rejTrack.Add(seq)
				return false
			}
			now := time.Now()
			if cfg.Scenario == "latency" || cfg.Scenario == "tcp-latency" || cfg.Scenario == "throughput" {
				// end to end: from the intended send time (latency) or the
				// time the sender took the message (throughput)
				intended := int64(binary.BigEndian.Uint64(body[8:]))
				if intended >= cfg.recordAfter.Load() {
					hmu.Lock()
					h.Record(now.UnixNano() - intended)
					hmu.Unlock()
				}
			}
			track.Add(seq)
			delivered.Add(1)
			lastRecv.Store(now.UnixNano())
			return true
		}
	}

	var recvs []receiver
	closeAll := func() {
		for _, r := range recvs {
			if err := r.Close(); err != nil {
				res.Errors = append(res.Errors, "receiver: "+err.Error())
			}
		}
		recvs = nil
	}
	defer closeAll()
	switch cfg.Scenario {
	case "throughput", "latency", "tcp-latency":
		for i := 0; i < cfg.Receivers; i++ {
			r, err := cfg.newReceiver(ctx, cfg.Source, newHandler(false))
			if err != nil {
				return nil, fmt.Errorf("receiver: %w", err)
			}
			recvs = append(recvs, r)
		}
	case "deadletter":
		for i := 0; i < cfg.Receivers; i++ {
			r, err := cfg.newReceiver(ctx, cfg.Source, newHandler(true))
			if err != nil {
				return nil, fmt.Errorf("rejecting receiver: %w", err)
			}
			recvs = append(recvs, r)
		}
		r, err := cfg.newReceiverWith(ctx, cfg.DLQEngine, cfg.DLQSource, newHandler(false))
		if err != nil {
			return nil, fmt.Errorf("dead-letter receiver: %w", err)
		}
		recvs = append(recvs, r)
	}
	senders := make([]sender, cfg.Senders)
	for i := range senders {
		s, err := cfg.newSender(ctx)
		if err != nil {
			for _, s := range senders[:i] {
				_ = s.Close()
			}
			return nil, fmt.Errorf("sender: %w", err)
		}
		senders[i] = s
	}

	var before ProcSample
	if cfg.BrokerPID > 0 {
		var err error
		if before, err = SampleProc(cfg.BrokerPID); err != nil {
			return nil, fmt.Errorf("broker pid: %w", err)
		}
	}

	selfBefore, _ := SampleProc(os.Getpid())
	var nextSeq atomic.Uint64
	var stopped atomic.Bool
	start = time.Now()
	startNs.Store(start.UnixNano())
	cfg.recordAfter.Store(start.UnixNano() + int64(cfg.Warmup))
	var deadline time.Time
	if cfg.Duration > 0 {
		deadline = start.Add(cfg.Duration)
	}
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	if interval > 0 && runtime.GOMAXPROCS(0) < cfg.Senders+1 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.Senders + 1))
	}
	var wg sync.WaitGroup
	var sendErrMu sync.Mutex
	for _, s := range senders {
		wg.Add(1)
		go func(s sender) {
			defer wg.Done()
			if interval > 0 {
				precisePacing()
				defer runtime.UnlockOSThread()
			}
			body := make([]byte, cfg.Size)
			for !stopped.Load() && ctx.Err() == nil {
				if !deadline.IsZero() && time.Now().After(deadline) {
					break
				}
				seq := nextSeq.Add(1) - 1
				if limit > 0 && seq >= limit {
					nextSeq.Add(^uint64(0)) // give it back: it was never sent
					break
				}
				intended := time.Now()
				if interval > 0 {
					intended = start.Add(time.Duration(seq) * interval)
					waitUntil(intended)
				}
				binary.BigEndian.PutUint64(body, seq+cfg.SeqStart)
				binary.BigEndian.PutUint64(body[8:], uint64(intended.UnixNano()))
				if err := s.Send(seq, body); err != nil {
					sendErrMu.Lock()
					res.Errors = append(res.Errors, "send: "+err.Error())
					sendErrMu.Unlock()
					stopped.Store(true)
					// this seq was claimed but not sent; count it as lost
					return
				}
			}
		}(s)
	}

	defer progress(cfg.Progress, func() string {
		el := time.Since(start).Seconds()
		return fmt.Sprintf("[%s %s] %5.1fs sent %d received %d (%.0f msg/s)", cfg.Engine, cfg.Scenario, el,
			nextSeq.Load(), delivered.Load(), float64(delivered.Load())/el)
	})()

	wg.Wait()
	sendEnd := time.Now()
	for _, s := range senders {
		if err := s.Wait(ctx); err != nil {
			res.Errors = append(res.Errors, "settle: "+err.Error())
		}
	}
	sent := nextSeq.Load()
	res.Sent = sent
	// wait for the deliveries: done when all sent were seen, or no progress for 5 s
	if cfg.Scenario != "fill" {
		last, lastChange := uint64(0), time.Now()
		for track.Unique() < sent && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
			if u := track.Unique(); u != last {
				last, lastChange = u, time.Now()
			} else if time.Since(lastChange) > 5*time.Second {
				break
			}
		}
	}
	end := time.Now()
	if cfg.Scenario == "fill" {
		end = sendEnd
		if cfg.Settle > 0 {
			time.Sleep(cfg.Settle)
		}
	} else if l := lastRecv.Load(); l > 0 {
		end = time.Unix(0, l)
	}
	var after ProcSample
	if cfg.BrokerPID > 0 {
		after, _ = SampleProc(cfg.BrokerPID)
	}
	if selfAfter, err := SampleProc(os.Getpid()); err == nil && selfBefore.Valid {
		res.ClientCPUSeconds = (selfAfter.CPU - selfBefore.CPU).Seconds()
	}
	res.Elapsed = end.Sub(start).Seconds()
	conf := &Histogram{}
	for _, s := range senders {
		conf.Merge(s.Confirms())
		st := s.Stats()
		res.PubAccepted += st.Accepted
		res.PubRejected += st.Rejected
		res.PubReleased += st.Released
		res.PubOther += st.Other
		if err := s.Close(); err != nil {
			res.Errors = append(res.Errors, "sender close: "+err.Error())
		}
	}
	// give late duplicates a moment to show before closing receivers
	if cfg.Scenario != "fill" {
		time.Sleep(100 * time.Millisecond)
	}
	for _, r := range recvs {
		st := r.Stats()
		res.BeyondCredit += st.BeyondCredit
		res.Undecodable += st.Undecodable
	}
	closeAll()

	if cfg.Scenario == "fill" {
		res.Received = 0
		if res.Elapsed > 0 {
			res.Rate = float64(res.PubAccepted) / res.Elapsed
		}
	} else {
		lost, dups, bad := track.Result(sent)
		res.Lost, res.Duplicated, res.Undecodable = lost, dups, res.Undecodable+bad
		res.Received = track.Unique()
		if res.Elapsed > 0 {
			res.Rate = float64(res.Received) / res.Elapsed
		}
		if cfg.Scenario == "deadletter" {
			_, d2, b2 := rejTrack.Result(sent)
			res.Duplicated += d2
			res.Undecodable += b2
		}
	}
	if cfg.BrokerPID > 0 && after.Valid {
		res.BrokerCPUSeconds = (after.CPU - before.CPU).Seconds()
		n := res.Received
		if cfg.Scenario == "fill" {
			n = res.PubAccepted
		}
		if n > 0 {
			res.BrokerCPUPerMsg = res.BrokerCPUSeconds * 1e6 / float64(n)
		}
		res.BrokerRSSBefore, res.BrokerRSSAfter = before.RSS, after.RSS
		if cfg.Scenario == "fill" && res.PubAccepted > 0 {
			res.BrokerRSSPerMsg = float64(after.RSS-before.RSS) / float64(res.PubAccepted)
		}
	}
	h := &Histogram{}
	histMu.Lock()
	for _, x := range hists {
		h.Merge(x)
	}
	histMu.Unlock()
	if h.Count() > 0 {
		ms := func(ns int64) float64 { return float64(ns) / 1e6 }
		res.LatP50, res.LatP90, res.LatP99, res.LatMax = ms(h.Percentile(50)), ms(h.Percentile(90)), ms(h.Percentile(99)), ms(h.Max())
		res.LatMean, res.LatN = h.Mean()/1e6, h.Count()
	}
	if conf.Count() > 0 {
		ms := func(ns int64) float64 { return float64(ns) / 1e6 }
		res.ConfP50, res.ConfP90, res.ConfP99, res.ConfMax = ms(conf.Percentile(50)), ms(conf.Percentile(90)), ms(conf.Percentile(99)), ms(conf.Max())
		res.ConfMean, res.ConfN = conf.Mean()/1e6, conf.Count()
	}

	if cfg.Scenario == "fill" && cfg.Drain && sent > 0 {
		if err := drain(ctx, cfg, sent, res); err != nil {
			res.Errors = append(res.Errors, "drain: "+err.Error())
		}
	}
	return res, nil
}

// consume attaches one receiver to a queue that holds the messages
// 0..Count-1 (left by a fill, e.g. before a broker restart) and consumes
// them, checking for loss and duplicates; it reports when the first
// delivery arrived and the drain rate.
func consume(ctx context.Context, cfg Config, res *Result) (*Result, error) {
	tr := NewSeqTracker(0)
	var first, last atomic.Int64
	var highest, outOfOrder atomic.Uint64 // highest is seq+1 of the highest seen
	var before ProcSample
	if cfg.BrokerPID > 0 {
		before, _ = SampleProc(cfg.BrokerPID)
	}
	start := time.Now()
	r, err := cfg.newReceiver(ctx, cfg.Source, func(b []byte) bool {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		seq := binary.BigEndian.Uint64(b)
		if seq+1 < highest.Load() {
			outOfOrder.Add(1)
		} else {
			highest.Store(seq + 1)
		}
		tr.Add(seq)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	res.ConnectedUnixNs = start.UnixNano()
	idle := 5 * time.Second
	if cfg.Duration > 0 {
		idle = cfg.Duration
	}
	lastN, lastChange := uint64(0), time.Now()
	for tr.Unique() < cfg.Count && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
		if u := tr.Unique(); u != lastN {
			lastN, lastChange = u, time.Now()
		} else if time.Since(lastChange) > idle {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	st := r.Stats()
	if err := r.Close(); err != nil {
		res.Errors = append(res.Errors, "receiver: "+err.Error())
	}
	lost, dups, bad := tr.Result(cfg.Count)
	res.Sent = cfg.Count
	res.Received = tr.Unique()
	res.Lost, res.Duplicated = lost, dups
	res.OutOfOrder = outOfOrder.Load()
	res.Undecodable = bad + st.Undecodable
	res.BeyondCredit = st.BeyondCredit
	if f := first.Load(); f > 0 {
		res.FirstDeliveryUnixNs = f
		res.FirstDeliveryMs = float64(f-start.UnixNano()) / 1e6
		res.Elapsed = float64(last.Load()-start.UnixNano()) / 1e9
		if res.Elapsed > 0 {
			res.Rate = float64(res.Received) / res.Elapsed
		}
	}
	if cfg.BrokerPID > 0 && before.Valid {
		if after, err := SampleProc(cfg.BrokerPID); err == nil {
			res.BrokerCPUSeconds = (after.CPU - before.CPU).Seconds()
			if res.Received > 0 {
				res.BrokerCPUPerMsg = res.BrokerCPUSeconds * 1e6 / float64(res.Received)
			}
			res.BrokerRSSBefore, res.BrokerRSSAfter = before.RSS, after.RSS
		}
	}
	return res, nil
}

// drain consumes the messages a fill published, checking them too.
func drain(ctx context.Context, cfg Config, sent uint64, res *Result) error {
	tr := NewSeqTracker(0)
	r, err := cfg.newReceiver(ctx, cfg.Source, func(b []byte) bool { tr.Add(binary.BigEndian.Uint64(b)); return true })
	if err != nil {
		return err
	}
	last, lastChange := uint64(0), time.Now()
	for tr.Unique() < sent && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		if u := tr.Unique(); u != last {
			last, lastChange = u, time.Now()
		} else if time.Since(lastChange) > 5*time.Second {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	st := r.Stats()
	cerr := r.Close()
	lost, dups, bad := tr.Result(sent)
	res.Received = tr.Unique()
	res.Lost += lost
	res.Duplicated += dups
	res.Undecodable += bad + st.Undecodable
	res.BeyondCredit += st.BeyondCredit
	return cerr
}

// waitUntil sleeps until t. Go's timers wake with about 1 ms granularity
// when the runtime blocks in epoll (its timeout is in milliseconds), and a
// spinning goroutine starves the network poller; either inflates the
// latency being measured. So the last stretch is a nanosleep system call on
// the sender's own locked OS thread (timer slack set to 1 ns), while
// GOMAXPROCS >= 2 lets the other goroutines keep a P. Sleep overshoot still
// counts as latency (the schedule is measured from intended times).
func waitUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		if d > 3*time.Millisecond {
			time.Sleep(d - 2*time.Millisecond)
			continue
		}
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil)
	}
}

// precisePacing prepares the calling goroutine for waitUntil.
func precisePacing() {
	runtime.LockOSThread()
	const prSetTimerSlack = 29
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
}

// progress writes line() to w every 2 s until the returned stop is called;
// stop returns once the writer goroutine has exited. A nil w writes nothing.
func progress(w io.Writer, line func() string) (stop func()) {
	if w == nil {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() { // exits when stop is called
		defer close(exited)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintln(w, line())
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
