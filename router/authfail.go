package router

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

// Defaults of the authentication brake.
const (
	DefaultAuthFailureDelay   = 3 * time.Second
	DefaultAuthFailureSources = 10000
	authFailMaxFactor         = 10 // the longest wait, in delays
	authFailWindowFactor      = 10 // a source's count restarts after this many delays without failure
)

type authFailRecord struct {
	src   netip.Addr
	count int
	last  time.Time
}

// authFailures is the per-source record of failed authentications.
type authFailures struct {
	delay      time.Duration // <= 0: no delay
	maxSources int

	total atomic.Uint64

	mu    sync.Mutex
	bySrc map[netip.Addr]*list.Element // of *authFailRecord
	lru   list.List                    // front: most recent failure
}

func newAuthFailures(delay time.Duration, maxSources int) *authFailures {
	switch {
	case delay == 0:
		delay = DefaultAuthFailureDelay
	case delay < 0:
		delay = 0
	}
	if maxSources <= 0 {
		maxSources = DefaultAuthFailureSources
	}
	return &authFailures{delay: delay, maxSources: maxSources, bySrc: make(map[netip.Addr]*list.Element)}
}

func (a *authFailures) failed(src netip.Addr, now time.Time) time.Duration {
	a.total.Add(1)
	if a.delay <= 0 {
		return 0
	}
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

// AuthFailed records a failed authentication (wrong password, unknown
// user, a user refused from where it connects) from src and returns how
// long to wait before answering it: Options.AuthFailureDelay times the
// number of recent failures from src, at most ten times. An invalid src
// (not an IP connection) is one source of its own.
func (b *Broker) AuthFailed(src netip.Addr) time.Duration {
	return b.authFail.failed(src, b.now())
}

// AuthFailures is the number of failed authentications since start.
func (b *Broker) AuthFailures() uint64 { return b.authFail.total.Load() }

// AuthFailureSources is the number of source addresses with a failure on
// record (at most Options.AuthFailureSources).
func (b *Broker) AuthFailureSources() int {
	b.authFail.mu.Lock()
	defer b.authFail.mu.Unlock()
	return b.authFail.lru.Len()
}
