package auth

import (
	"container/list"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Failed authentications are answered late, as RabbitMQ answers a refused
// SASL response only after its silent close delay (3 s), so that one
// connection cannot try passwords at the speed of the network. Repeated
// failures from one source address wait longer: the n-th failure within
// authFailWindowFactor delays of the previous one waits n delays, up to
// authFailMaxFactor. The per-source records are bounded (least recently
// failed evicted first), so spoofed or many addresses cannot grow memory.

// Defaults of the brake a new Registry applies (SetLoginBrake changes them).
const (
	DefaultLoginFailureDelay   = 3 * time.Second
	DefaultLoginFailureSources = 10000
	authFailMaxFactor          = 10 // the longest wait, in delays
	authFailWindowFactor       = 10 // a source's count restarts after this many delays without failure
)

type authFailRecord struct {
	src   netip.Addr
	count int
	last  time.Time
}

// LoginBrake is the per-source record of failed authentications; it is
// safe for concurrent use.
type LoginBrake struct {
	delay      time.Duration // 0: no wait
	maxSources int
	now        func() time.Time

	total atomic.Uint64

	mu    sync.Mutex
	bySrc map[netip.Addr]*list.Element // of *authFailRecord
	lru   list.List                    // front: most recent failure
}

// NewLoginBrake returns a brake that waits delay per recent failure from
// a source (0: no wait, as the auth-failure-delay setting's zero means)
// and remembers at most maxSources sources (at least one). now is the
// clock; nil means time.Now.
func NewLoginBrake(delay time.Duration, maxSources int, now func() time.Time) *LoginBrake {
	if now == nil {
		now = time.Now
	}
	return &LoginBrake{delay: max(delay, 0), maxSources: max(maxSources, 1), now: now,
		bySrc: make(map[netip.Addr]*list.Element)}
}

// Failed records a failed authentication (wrong password, unknown user, a
// user refused from where it connects) from src and returns how long to
// wait before answering it: the delay times the number of recent failures
// from src, at most ten times. An invalid src (not an IP connection) is
// one source of its own.
func (a *LoginBrake) Failed(src netip.Addr) time.Duration {
	a.total.Add(1)
	if a.delay <= 0 {
		return 0
	}
	now := a.now()
	src = src.Unmap()
	a.mu.Lock()
	defer a.mu.Unlock()
	var r *authFailRecord
	if el, ok := a.bySrc[src]; ok {
		r = el.Value.(*authFailRecord)
		a.lru.MoveToFront(el)
		if now.Sub(r.last) > authFailWindowFactor*a.delay {
			r.count = 0
		}
	} else {
		if a.lru.Len() >= a.maxSources {
			oldest := a.lru.Back()
			delete(a.bySrc, oldest.Value.(*authFailRecord).src)
			a.lru.Remove(oldest)
		}
		r = &authFailRecord{src: src}
		a.bySrc[src] = a.lru.PushFront(r)
	}
	r.count++
	r.last = now
	return time.Duration(min(r.count, authFailMaxFactor)) * a.delay
}

// Failures is the number of failed authentications recorded.
func (a *LoginBrake) Failures() uint64 { return a.total.Load() }

// Sources is the number of source addresses with a failure on record.
func (a *LoginBrake) Sources() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lru.Len()
}
