package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// SIGKILL during at-least-once dead-lettering.
//
// Topology (all durable; quorum queues dead-letter at least once):
//
//	q1 --rejected / modified{undeliverable-here} / expired (per-message TTL 50 ms)--> dlx "to-q2" --> q2
//	q2 --expired (x-message-ttl 50 ms, no consumer)--> dlx "to-q3" --> q3 (classic DLQ)
//	qc --rejected--> "" "qc" (a self-loop through rejection, which is no cycle: each message is rejected
//	   until its death count for {qc, rejected} reaches 2, then accepted)
//	qcyc --expired (x-message-ttl 50 ms)--> "" "qcyc": a cycle, retained; after the last restart a
//	   policy sets the routing key cycdlq and the retained messages move there.
//
// Publishers number their messages; consumers use rcv-settle-mode second, so
// an outcome call returns after the broker applied it. The broker is
// SIGKILLed at random points (EPITAPH_CRASH_ITERATIONS, default 3); after
// the final restart everything is drained and the ledger checked: every
// accepted message ends in exactly one place (consumed, in a DLQ, or still
// queued), none is lost, duplicates (at-least-once redelivery) are counted
// and reported, no dead-letter move is duplicated (it is atomic on one
// node), and every x-opt-deaths history is correct: no inflated count,
// x-first-death-* unchanged, x-last-death-* the latest.
//
// EPITAPH_CRASH_DL_DEBUG=1 (or an absolute directory to keep them) copies
// the data directory after every kill; when messages are lost, each copy is opened
// and searched for them, to find the iteration that lost them.

const crashDLDefs = `{
 "exchanges":[{"name":"dlx","vhost":"/","type":"direct","durable":true,"auto_delete":false,"internal":false,"arguments":{}}],
 "queues":[
  {"name":"q1","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-queue-type":"quorum",
   "x-dead-letter-exchange":"dlx","x-dead-letter-routing-key":"to-q2","x-dead-letter-strategy":"at-least-once",
   "x-overflow":"reject-publish","x-max-length":1000000,"x-delivery-limit":-1}},
  {"name":"q2","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-queue-type":"quorum",
   "x-dead-letter-exchange":"dlx","x-dead-letter-routing-key":"to-q3","x-dead-letter-strategy":"at-least-once",
   "x-overflow":"reject-publish","x-max-length":1000000,"x-message-ttl":50}},
  {"name":"q3","vhost":"/","durable":true,"auto_delete":false,"arguments":{}},
  {"name":"qc","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-queue-type":"quorum",
   "x-dead-letter-exchange":"","x-dead-letter-routing-key":"qc","x-dead-letter-strategy":"at-least-once",
   "x-overflow":"reject-publish","x-max-length":1000000,"x-delivery-limit":-1}},
  {"name":"qcyc","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-queue-type":"quorum",
   "x-dead-letter-exchange":"","x-dead-letter-strategy":"at-least-once",
   "x-overflow":"reject-publish","x-max-length":1000000,"x-message-ttl":50}},
  {"name":"cycdlq","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}],
 "bindings":[
  {"source":"dlx","vhost":"/","destination":"q2","destination_type":"queue","routing_key":"to-q2","arguments":{}},
  {"source":"dlx","vhost":"/","destination":"q3","destination_type":"queue","routing_key":"to-q3","arguments":{}}]}`

// crashDLMsg is the ledger entry of one published message.
type crashDLMsg struct {
	stream string // q1, qc or qcyc: where it was published
	seq    int
	ttl    bool // published with a 50 ms TTL (q1 only)

	attempted   bool
	accepted    bool // the broker said accepted
	pubUnknown  bool // the publish's outcome is unknown (killed)
	pubRejected bool

	consumed      int         // accepted by a consumer during the run (outcome confirmed)
	settledAt     []time.Time // when each confirmed outcome (accept, reject, modify) returned
	acceptedAt    time.Time   // when the publish was confirmed
	deliveredAt   []time.Time // deliveries to the q1 / qc consumers
	acceptUnknown int         // accept attempted, outcome unknown
	deadOK        int         // rejected / modified{undeliverable-here}, outcome confirmed
	deadUnknown   int         // rejected / modified{undeliverable-here}, outcome unknown
	found         map[string]int
	qcFirstTime   time.Time // qc: first-time of {qc, rejected}, once seen
	qcRollbacks   int       // qc: deliveries showing fewer deaths than confirmed rejects (a settle lost in a crash)
	deliveries    int
}

// crashDLDecision is what the q1 consumer does with message seq: 30 % reject,
// 10 % modified{undeliverable-here}, the rest accept.
func crashDLDecision(seq int) string {
	switch seq % 10 {
	case 0, 1, 2:
		return "reject"
	case 3:
		return "modify"
	}
	return "accept"
}

type crashDLLedger struct {
	mu   sync.Mutex
	msgs map[string]*crashDLMsg
	seq  map[string]int
	errs []string // history violations found while consuming

	reasons map[string]int // q1 death reason / consumer decision, over the q2 and q3 copies
}

func (l *crashDLLedger) next(stream string) *crashDLMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq[stream]++
	s := l.seq[stream]
	m := &crashDLMsg{stream: stream, seq: s, attempted: true, ttl: stream == "q1" && s%3 == 0, found: map[string]int{}}
	l.msgs[fmt.Sprintf("%s-%d", stream, s)] = m
	return m
}

func (l *crashDLLedger) get(b string) *crashDLMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs[b]
}

func (l *crashDLLedger) errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

func (l *crashDLLedger) count(stream string, f func(*crashDLMsg) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m.stream == stream && f(m) {
			n++
		}
	}
	return n
}

// deathProblems checks one x-opt-deaths entry and returns what is wrong.
func deathProblems(d map[any]any, queue, reason string, count uint64, exchange string, rks []string, ttl uint32, hasTTL bool) []string {
	var p []string
	want := 7
	if hasTTL {
		want = 8
		if d["ttl"] != ttl {
			p = append(p, fmt.Sprintf("ttl %v, want %d", d["ttl"], ttl))
		}
	} else if _, ok := d["ttl"]; ok {
		p = append(p, fmt.Sprintf("unexpected ttl %v", d["ttl"]))
	}
	if len(d) != want {
		p = append(p, fmt.Sprintf("%d keys, want %d: %v", len(d), want, d))
	}
	for k, v := range map[string]any{"queue": queue, "reason": reason, "count": count, "exchange": exchange} {
		if d[k] != v {
			p = append(p, fmt.Sprintf("%s %v (%T), want %v", k, d[k], d[k], v))
		}
	}
	if got, _ := d["routing-keys"].([]string); !slices.Equal(got, rks) {
		p = append(p, fmt.Sprintf("routing-keys %v, want %v", d["routing-keys"], rks))
	}
	ft, ok1 := d["first-time"].(time.Time)
	lt, ok2 := d["last-time"].(time.Time)
	switch {
	case !ok1 || !ok2:
		p = append(p, fmt.Sprintf("first-time/last-time are %T/%T", d["first-time"], d["last-time"]))
	case lt.Before(ft):
		p = append(p, fmt.Sprintf("last-time %v before first-time %v", lt, ft))
	case count == 1 && !lt.Equal(ft):
		p = append(p, fmt.Sprintf("count 1 but first-time %v != last-time %v", ft, lt))
	}
	return p
}

func sixProblems(m *amqp.Message, fq, fr, fx, lq, lr, lx string) []string {
	var p []string
	for k, v := range map[string]string{"x-first-death-queue": fq, "x-first-death-reason": fr, "x-first-death-exchange": fx,
		"x-last-death-queue": lq, "x-last-death-reason": lr, "x-last-death-exchange": lx} {
		if m.Annotations[k] != v {
			p = append(p, fmt.Sprintf("%s = %v, want %q", k, m.Annotations[k], v))
		}
	}
	return p
}

func deathsOrNil(m *amqp.Message) ([]map[any]any, bool) {
	v, ok := m.Annotations["x-opt-deaths"]
	if !ok {
		return nil, true
	}
	d, ok := v.([]map[any]any)
	return d, ok
}

// checkQ1Death checks the q1 death entry of a message that left q1.
func (l *crashDLLedger) checkQ1Death(b string, rec *crashDLMsg, d map[any]any) (reason string, problems []string) {
	reason, _ = d["reason"].(string)
	l.mu.Lock()
	if l.reasons == nil {
		l.reasons = map[string]int{}
	}
	l.reasons[reason+"/"+crashDLDecision(rec.seq)]++
	l.mu.Unlock()
	switch {
	case reason == "expired" && !rec.ttl:
		problems = append(problems, "expired from q1 without a TTL")
	case reason == "rejected" && crashDLDecision(rec.seq) == "accept":
		problems = append(problems, "rejected from q1 although the consumer only ever accepted it")
	case reason != "expired" && reason != "rejected":
		problems = append(problems, "reason "+reason)
	}
	problems = append(problems, deathProblems(d, "q1", reason, 1, "", []string{"q1"}, 50, rec.ttl)...)
	return reason, problems
}

// checkCopy checks the history of a copy drained from queue q.
func (l *crashDLLedger) checkCopy(q string, m *amqp.Message) {
	b := body(m)
	rec := l.get(b)
	if rec == nil {
		return // unexpected; reported by the ledger
	}
	ds, ok := deathsOrNil(m)
	if !ok {
		l.errorf("%s in %s: x-opt-deaths is %T", b, q, m.Annotations["x-opt-deaths"])
		return
	}
	var p []string
	switch q {
	case "q1", "qcyc":
		if len(ds) != 0 {
			p = append(p, fmt.Sprintf("a message never dead-lettered has deaths %v", ds))
		}
	case "q2":
		if len(ds) != 1 {
			p = append(p, fmt.Sprintf("%d deaths, want 1: %v", len(ds), ds))
			break
		}
		r, pp := l.checkQ1Death(b, rec, ds[0])
		p = append(p, pp...)
		p = append(p, sixProblems(m, "q1", r, "", "q1", r, "")...)
	case "q3":
		if len(ds) != 2 {
			p = append(p, fmt.Sprintf("%d deaths, want 2: %v", len(ds), ds))
			break
		}
		p = append(p, deathProblems(ds[0], "q2", "expired", 1, "dlx", []string{"to-q2"}, 0, false)...)
		r, pp := l.checkQ1Death(b, rec, ds[1])
		p = append(p, pp...)
		p = append(p, sixProblems(m, "q1", r, "", "q2", "expired", "dlx")...)
		t1, _ := ds[1]["first-time"].(time.Time)
		t2, _ := ds[0]["first-time"].(time.Time)
		if t2.Before(t1) {
			p = append(p, fmt.Sprintf("q2 death at %v before the q1 death at %v", t2, t1))
		}
	case "cycdlq":
		if len(ds) != 1 {
			p = append(p, fmt.Sprintf("%d deaths, want 1: %v", len(ds), ds))
			break
		}
		// Retried every 100 ms for as long as it was a cycle, across
		// restarts: still one death, recorded once.
		p = append(p, deathProblems(ds[0], "qcyc", "expired", 1, "", []string{"qcyc"}, 0, false)...)
		p = append(p, sixProblems(m, "qcyc", "expired", "", "qcyc", "expired", "")...)
	case "qc":
		p = l.qcDelivery(rec, m, ds)
	}
	for _, s := range p {
		l.errorf("%s in %s: %s", b, q, s)
	}
}

// qcDelivery checks a delivery from qc against the rejects we know of: the
// count of {qc, rejected} is at most the number of rejects that may have
// been applied (confirmed + unknown); fewer than confirmed means a settle
// was lost in a crash (counted); first-time never changes once recorded.
func (l *crashDLLedger) qcDelivery(rec *crashDLMsg, m *amqp.Message, ds []map[any]any) []string {
	var p []string
	var c uint64
	if len(ds) > 1 {
		p = append(p, fmt.Sprintf("%d deaths, want at most 1: %v", len(ds), ds))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rec.deliveries++
	if len(ds) == 0 {
		rec.qcFirstTime = time.Time{} // every reject was lost: a new history may start
		if rec.deadOK > 0 {
			rec.qcRollbacks++
		}
		return p
	}
	d := ds[0]
	c, _ = d["count"].(uint64)
	p = append(p, deathProblems(d, "qc", "rejected", c, "", []string{"qc"}, 0, false)...)
	p = append(p, sixProblems(m, "qc", "rejected", "", "qc", "rejected", "")...)
	if max := uint64(rec.deadOK + rec.deadUnknown); c > max || c == 0 {
		p = append(p, fmt.Sprintf("inflated death count %d: %d rejects confirmed, %d unknown", c, rec.deadOK, rec.deadUnknown))
	}
	if c < uint64(rec.deadOK) {
		rec.qcRollbacks++
	}
	ft, _ := d["first-time"].(time.Time)
	if !rec.qcFirstTime.IsZero() && !ft.Equal(rec.qcFirstTime) {
		p = append(p, fmt.Sprintf("x-opt-deaths first-time changed from %v to %v", rec.qcFirstTime, ft))
	}
	rec.qcFirstTime = ft
	return p
}

func TestCrashAtLeastOnceDeadLettering(t *testing.T) { crashAtLeastOnce(t) }

// TestCrashAtLeastOnceDeadLetteringPaged is the same loop with a one-byte
// queue window: the source queues, the targets and the DLQs page their
// messages out, and dead-letter moves read paged bodies back.
func TestCrashAtLeastOnceDeadLetteringPaged(t *testing.T) {
	crashAtLeastOnce(t, "--queue-window-bytes", "1")
}

func crashAtLeastOnce(t *testing.T, extra ...string) {
	iterations := 3
	if n, _ := strconv.Atoi(os.Getenv("EPITAPH_CRASH_ITERATIONS")); n > 0 {
		iterations = n
	}
	start := time.Now()
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(2, seed))
	l := &crashDLLedger{msgs: map[string]*crashDLMsg{}, seq: map[string]int{}}
	second := amqp.ReceiverSettleModeSecond
	var kills []time.Time

	for it := range iterations {
		p, _ := startALOBinary(t, dir, crashDLDefs, extra...)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		dialSession := func() (*amqp.Conn, *amqp.Session, bool) {
			c, err := amqp.Dial(ctx, "amqp://"+p.addr, nil)
			if err != nil {
				return nil, nil, false
			}
			s, err := c.NewSession(ctx, nil)
			if err != nil {
				c.Close()
				return nil, nil, false
			}
			return c, s, true
		}

		// Publishers: two pipelined on q1 (32 in flight each), one on qc,
		// one on qcyc (100 messages per run).
		publisher := func(stream string, inFlight, limit int) {
			c, s, ok := dialSession()
			if !ok {
				return
			}
			defer c.Close()
			snd, err := s.NewSender(ctx, "/queues/"+stream, nil)
			if err != nil {
				return
			}
			type pending struct {
				rec *crashDLMsg
				r   amqp.SendReceipt
			}
			ch := make(chan pending, inFlight)
			var ww sync.WaitGroup
			ww.Go(func() {
				for pd := range ch {
					st, _ := pd.r.Wait(ctx)
					l.mu.Lock()
					switch st.(type) {
					case nil: // err: killed, the outcome is unknown
						pd.rec.pubUnknown = true
					case *amqp.StateAccepted:
						pd.rec.accepted = true
						pd.rec.acceptedAt = time.Now()
					default:
						pd.rec.pubRejected = true
					}
					l.mu.Unlock()
				}
			})
			defer ww.Wait()
			defer close(ch)
			for n := 0; ctx.Err() == nil && (limit == 0 || n < limit); n++ {
				rec := l.next(stream)
				m := durableMsg(fmt.Sprintf("%s-%d", stream, rec.seq))
				m.ApplicationProperties = map[string]any{"producer-id": stream, "seq": int64(rec.seq)}
				if rec.ttl {
					m.Header.TTL = 50 * time.Millisecond
				}
				r, err := snd.SendWithReceipt(ctx, m, nil)
				if err != nil {
					l.mu.Lock()
					rec.pubUnknown = true
					l.mu.Unlock()
					return
				}
				ch <- pending{rec, r}
			}
		}
		wg.Go(func() { publisher("q1", 32, 0) })
		wg.Go(func() { publisher("q1", 32, 0) })
		wg.Go(func() { publisher("qc", 1, 0) })
		wg.Go(func() { publisher("qcyc", 1, 100) })

		// settle applies an outcome and records it.
		settle := func(rec *crashDLMsg, dead bool, f func() error) {
			err := f()
			l.mu.Lock()
			defer l.mu.Unlock()
			if err == nil {
				rec.settledAt = append(rec.settledAt, time.Now())
			}
			switch {
			case dead && err == nil:
				rec.deadOK++
			case dead:
				rec.deadUnknown++
			case err == nil:
				rec.consumed++
			default:
				rec.acceptUnknown++
			}
		}
		// consume settles, with handle, every message queue delivers
		// (rcv-settle-mode second, credit 20) until the broker dies.
		consume := func(queue string, handle func(r *amqp.Receiver, m *amqp.Message, rec *crashDLMsg)) {
			wg.Go(func() {
				c, s, ok := dialSession()
				if !ok {
					return
				}
				defer c.Close()
				r, err := s.NewReceiver(ctx, "/queues/"+queue, &amqp.ReceiverOptions{SettlementMode: &second, Credit: 20})
				if err != nil {
					return
				}
				for ctx.Err() == nil {
					m, err := r.Receive(ctx, nil)
					if err != nil {
						return
					}
					rec := l.get(body(m))
					if rec == nil {
						l.errorf("%s delivered %q, never published", queue, body(m))
						continue
					}
					handle(r, m, rec)
				}
			})
		}
		// The q1 consumer: reject 30 %, modified{undeliverable-here} 10 %.
		consume("q1", func(r *amqp.Receiver, m *amqp.Message, rec *crashDLMsg) {
			if ds, _ := deathsOrNil(m); len(ds) != 0 {
				l.errorf("%s delivered from q1 with deaths %v", body(m), ds)
			}
			l.mu.Lock()
			rec.deliveredAt = append(rec.deliveredAt, time.Now())
			l.mu.Unlock()
			switch crashDLDecision(rec.seq) {
			case "reject":
				settle(rec, true, func() error { return r.RejectMessage(ctx, m, nil) })
			case "modify":
				settle(rec, true, func() error {
					return r.ModifyMessage(ctx, m, &amqp.ModifyMessageOptions{DeliveryFailed: true, UndeliverableHere: true})
				})
			default:
				settle(rec, false, func() error { return r.AcceptMessage(ctx, m) })
			}
		})
		// The qc consumer: reject until the death count reaches 2.
		consume("qc", func(r *amqp.Receiver, m *amqp.Message, rec *crashDLMsg) {
			l.checkCopy("qc", m)
			var c uint64
			if ds, _ := deathsOrNil(m); len(ds) > 0 {
				c, _ = ds[0]["count"].(uint64)
			}
			if c < 2 {
				settle(rec, true, func() error { return r.RejectMessage(ctx, m, nil) })
			} else {
				settle(rec, false, func() error { return r.AcceptMessage(ctx, m) })
			}
		})

		want := 150 * (it + 1)
		eventually(t, "traffic", func() bool {
			return l.count("q1", func(m *crashDLMsg) bool { return m.accepted }) > want &&
				l.count("qc", func(m *crashDLMsg) bool { return m.deadOK > 0 }) > 0
		})
		<-time.After(time.Duration(rng.IntN(500)) * time.Millisecond) // a random point in the traffic, not synchronisation
		kills = append(kills, time.Now())
		sigkill(t, p)
		if os.Getenv("EPITAPH_CRASH_DL_DEBUG") != "" {
			out, err := exec.Command("cp", "-a", filepath.Join(dir, "data"), crashDLSnapDir(dir, it)).CombinedOutput()
			require.NoError(t, err, "%s", out)
		}
		cancel()
		wg.Wait()
	}
	killed := time.Now()

	// Final restart: fix the cycle's routing key, then drain everything.
	p, base := startALOBinary(t, dir, crashDLDefs, extra...)
	api(t, base, "PUT", "/api/policies/%2f/cyc", map[string]any{"pattern": "^qcyc$", "apply-to": "queues",
		"definition": map[string]any{"dead-letter-routing-key": "cycdlq"}}, 201)
	c, err := amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
	require.NoError(t, err)
	defer c.Close()
	var dmu sync.Mutex
	unexpected := map[string]int{}
	drained := 0
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	for _, q := range []string{"q1", "q2", "q3", "qc", "qcyc", "cycdlq"} {
		r := receiver(t, session(t, c), "/queues/"+q, &amqp.ReceiverOptions{Credit: 200})
		wg.Go(func() {
			for {
				m, err := r.Receive(ctx, nil)
				if err != nil {
					return
				}
				b := body(m)
				if rec := l.get(b); rec == nil {
					dmu.Lock()
					unexpected[q+":"+b]++
					dmu.Unlock()
				} else {
					l.checkCopy(q, m)
					l.mu.Lock()
					rec.found[q]++
					l.mu.Unlock()
				}
				dmu.Lock()
				drained++
				dmu.Unlock()
				if err := r.AcceptMessage(ctx, m); err != nil {
					return
				}
			}
		})
	}
	// missing lists accepted messages not consumed and not found (yet).
	missing := func() []string {
		l.mu.Lock()
		defer l.mu.Unlock()
		var out []string
		for b, m := range l.msgs {
			if m.accepted && m.consumed == 0 && m.acceptUnknown == 0 && len(m.found) == 0 {
				out = append(out, b)
			}
		}
		sort.Strings(out)
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		<-time.After(20 * time.Millisecond) // polling interval
	}
	// Let in-flight copies (q2's 50 ms TTL, retries) land, then require
	// every queue to be empty.
	for _, q := range []string{"q1", "q2", "q3", "qc", "qcyc", "cycdlq"} {
		eventually(t, q+" empty", func() bool {
			st, out := apiCall(t, base, "GET", "/api/queues/%2f/"+q, nil)
			return st == 200 && apiJSON[map[string]any](t, out)["messages"] == float64(0)
		})
	}
	<-time.After(300 * time.Millisecond) // a quiet period in which no further copy may appear
	cancel()
	wg.Wait()

	// The ledger.
	l.mu.Lock()
	defer l.mu.Unlock()
	var (
		lost, recovered, attempted, accepted, pubUnknown, pubRejected, consumed, dups, consumedTwice int
		moveDups                                                                                     []string
		inQueue                                                                                      = map[string]int{}
		rollbacks, acceptUnknown, deadUnknown                                                        int
		undone                                                                                       []time.Duration
	)
	var lostList []string
	for b, m := range l.msgs {
		attempted++
		copies := m.consumed
		for q, n := range m.found {
			copies += n
			inQueue[q] += n
		}
		if m.consumed > 0 {
			consumed++
		}
		consumedTwice += max(m.consumed-1, 0)
		if m.consumed > 1 || (m.consumed > 0 && len(m.found) > 0) {
			// How long before the next kill was the first accept confirmed?
			at := m.settledAt[0]
			for _, k := range kills {
				if k.After(at) {
					undone = append(undone, k.Sub(at))
					break
				}
			}
		}
		rollbacks += m.qcRollbacks
		acceptUnknown += m.acceptUnknown
		deadUnknown += m.deadUnknown
		switch {
		case m.accepted:
			accepted++
		case m.pubUnknown:
			pubUnknown++
		}
		if m.pubRejected {
			pubRejected++
			t.Errorf("%s: publish rejected (the queues have room)", b)
		}
		if m.accepted && copies == 0 && m.acceptUnknown == 0 {
			lost++
			lostList = append(lostList, b)
		}
		if !m.accepted && copies > 0 {
			recovered++
		}
		if copies > 1 {
			dups += copies - 1
		}
		// A dead-letter move is atomic on a single node: a message is in
		// at most one of the queues of its path after the drain.
		var where []string
		for q, n := range m.found {
			for range n {
				where = append(where, q)
			}
		}
		if len(where) > 1 {
			sort.Strings(where)
			moveDups = append(moveDups, b+" in "+strings.Join(where, ", "))
		}
		// A message the q1 consumer rejected (confirmed) must have left q1.
		if m.stream == "q1" && m.deadOK > 0 && m.found["q1"] > 0 {
			// Allowed only if the reject was lost in a crash; it is then
			// a redelivery, counted.
			rollbacks++
		}
	}
	sort.Strings(lostList)
	slices.Sort(undone)
	if len(undone) > 0 {
		t.Logf("confirmed accepts undone by a kill: %d; confirmed before the kill by: min %v, median %v, max %v",
			len(undone), undone[0], undone[len(undone)/2], undone[len(undone)-1])
	}
	sort.Strings(moveDups)
	t.Logf("crash-dl: %d kills (seed %d) in %v, drain %v: %d published, %d accepted, %d unknown (%d of them recovered), "+
		"%d rejected; %d consumed during the run (%d consumed twice), found after the restart %v; "+
		"lost %d, unexpected %d, duplicates %d (consumer redeliveries), move duplicates %d, settles lost in a crash %d, "+
		"outcomes unknown: %d accept, %d reject/modify; drained %d; q1 deaths by reason/decision %v",
		iterations, seed, killed.Sub(start).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond),
		attempted, accepted, pubUnknown, recovered, pubRejected, consumed, consumedTwice, inQueue,
		lost, len(unexpected), dups, len(moveDups), rollbacks, acceptUnknown, deadUnknown, drained, l.reasons)
	if len(lostList) > 0 {
		for _, b := range lostList[:min(len(lostList), 10)] {
			m := l.msgs[b]
			rel := func(ts ...time.Time) []string {
				var out []string
				for _, x := range ts {
					out = append(out, x.Sub(start).Round(time.Millisecond).String())
				}
				return out
			}
			t.Logf("lost %s: ttl %v decision %s; outcomes: %d accepted, %d accept unknown, %d dead confirmed, %d dead unknown; "+
				"publish confirmed at %v, delivered at %v, settled at %v (kills at %v)",
				b, m.ttl, crashDLDecision(m.seq), m.consumed, m.acceptUnknown, m.deadOK, m.deadUnknown,
				rel(m.acceptedAt), rel(m.deliveredAt...), rel(m.settledAt...), rel(kills...))
		}
		l.mu.Unlock()
		crashDLDiagnose(t, p, filepath.Join(dir, "data"))
		if os.Getenv("EPITAPH_CRASH_DL_DEBUG") != "" {
			for it := range iterations {
				crashDLSnapshot(t, crashDLSnapDir(dir, it), lostList[:min(len(lostList), 40)])
			}
		}
		l.mu.Lock()
	}
	assert.Empty(t, lostList, "accepted messages lost")
	assert.Empty(t, unexpected, "messages never published")
	assert.Empty(t, moveDups, "duplicated dead-letter moves")
	assert.Empty(t, l.errs, "dead-letter history violations")
	assert.Positive(t, inQueue["q3"], "some messages went the two hops")
	assert.Positive(t, inQueue["cycdlq"], "the cycle's retained messages were delivered")
}

// crashDLDiagnose stops the broker and opens its data directory in process to
// show where the lost messages are: each queue's ready, unacknowledged and
// retained counts, and why retained messages are not forwarded.
func crashDLDiagnose(t *testing.T, p *proc, data string) {
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.wait(t)
	logs := &syncBuffer{}
	opts := testOptions()
	opts.InMemory, opts.DataDir, opts.DeadLetterRetryInterval = false, data, aloRetry
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	defer b.Close()
	for _, q := range vhost(t, b).Queues() {
		i := q.Info()
		t.Logf("diagnosis: %s: %d ready, %d unacked, %d retained", i.Name, i.Messages, i.MessagesUnacknowledged, i.Retained)
	}
	b.Router().RetryDeadLetters()
	why := map[string]int{}
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if _, w, ok := strings.Cut(line, "why="); ok {
			why[w]++
		}
	}
	t.Logf("diagnosis: retained because %v; retained attempts %v", why, b.DeadLetters().RetainedStats())
}

// crashDLSnapshot opens a copy of the data directory taken after a kill and
// reports where the given messages are.
func crashDLSnapshot(t *testing.T, snap string, bodies []string) {
	data := t.TempDir()
	out, err := exec.Command("cp", "-a", snap+"/.", data).CombinedOutput()
	require.NoError(t, err, "%s", out)
	opts := testOptions()
	opts.InMemory, opts.DataDir, opts.DeadLetterRetryInterval = false, data, time.Hour
	b, err := epitaph.Start(opts)
	data = snap
	require.NoError(t, err)
	defer b.Close()
	where := map[string][]string{}
	counts := map[string]int{}
	for _, q := range vhost(t, b).Queues() {
		counts[q.Name()] = q.Info().Messages
	}
	c, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), nil)
	require.NoError(t, err)
	defer c.Close()
	s := session(t, c)
	for _, q := range []string{"q1", "q2", "q3"} {
		r := receiver(t, s, "/queues/"+q, &amqp.ReceiverOptions{Credit: 1000})
		for {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			m, err := r.Receive(ctx, nil)
			cancel()
			if err != nil {
				break
			}
			where[body(m)] = append(where[body(m)], q)
			_ = r.AcceptMessage(ctxT(t), m)
		}
	}
	var present, absent []string
	for _, bd := range bodies {
		if w := where[bd]; len(w) > 0 {
			present = append(present, bd+"@"+strings.Join(w, "+"))
		} else {
			absent = append(absent, bd)
		}
	}
	t.Logf("snapshot %s: ready %v; lost messages present %v, absent %v", filepath.Base(data), counts, present, absent)
}

// crashDLSnapDir is where the copy of the data directory after kill it goes
// (EPITAPH_CRASH_DL_DEBUG: an absolute path keeps them after the test).
func crashDLSnapDir(dir string, it int) string {
	if d := os.Getenv("EPITAPH_CRASH_DL_DEBUG"); filepath.IsAbs(d) {
		dir = d
	}
	return filepath.Join(dir, fmt.Sprintf("snap-%02d", it))
}

// recoveryDefs: a-src sorts (and is recovered) before z-dlq, into which it
// dead-letters at least once; a delivery limit of 0 makes a delivery left
// unsettled by a crash die as the queue is recovered.
const recoveryDefs = `{"queues":[
 {"name":"a-src","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum","x-delivery-limit":0,
  "x-dead-letter-exchange":"","x-dead-letter-routing-key":"z-dlq","x-dead-letter-strategy":"at-least-once","x-overflow":"reject-publish"}},
 {"name":"z-dlq","vhost":"/","durable":true,"arguments":{}}]}`

// A message that dies while its queue is recovered (here: delivered and
// unsettled at the crash, over its delivery limit) is moved into a target
// queue that may not be recovered yet: the move must not reuse the seqs of
// the target's stored messages. Found by TestCrashAtLeastOnceDeadLettering
// (early DLQ messages overwritten by dead letters made during recovery).
func TestRecoveryDeadLetterKeepsTargetMessages(t *testing.T) {
	dir := t.TempDir()
	p, _ := startALOBinary(t, dir, recoveryDefs)
	c, err := amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
	require.NoError(t, err)
	s := session(t, c)
	publish(t, s, "/queues/z-dlq", durableMsg("old-1"), durableMsg("old-2"), durableMsg("old-3"))
	publish(t, s, "/queues/a-src", durableMsg("dying"))
	r := receiver(t, s, "/queues/a-src", nil)
	require.Equal(t, "dying", body(recv(t, r))) // held, unsettled
	// The delivered state of "dying" is written without being waited for;
	// the store applies and confirms batches in order, so the accepted
	// outcome of a later durable publish means it is synced too.
	publish(t, s, "/queues/a-src", durableMsg("barrier"))
	sigkill(t, p)
	_ = c.Close()

	// drain reads z-dlq (all four expected); settle accepts them.
	drain := func(p *proc, settle bool) []string {
		c, err := amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
		require.NoError(t, err)
		defer c.Close()
		dr := receiver(t, session(t, c), "/queues/z-dlq", &amqp.ReceiverOptions{Credit: 10})
		var got []string
		for range 4 {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			m, err := dr.Receive(ctx, nil)
			cancel()
			if err != nil {
				break // missing: reported by the caller
			}
			got = append(got, body(m))
			if settle {
				accept(t, dr, m)
			}
		}
		return got
	}
	want := []string{"old-1", "old-2", "old-3", "dying"}
	// Restarted: the recovered messages, then the dead letter made during
	// the recovery. Unsettled, they stay in z-dlq.
	p, _ = startALOBinary(t, dir, recoveryDefs)
	assert.Equal(t, want, drain(p, false), "z-dlq after the first restart")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.wait(t)
	// And they are all stored.
	p, _ = startALOBinary(t, dir, recoveryDefs)
	assert.Equal(t, want, drain(p, true), "z-dlq after a second (clean) restart")
}
