package httpapi

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/management"
	"github.com/epitaph-mq/epitaph/router"
)

// DefaultEventsHeartbeat is Options.EventsHeartbeat's default.
const DefaultEventsHeartbeat = 15 * time.Second

// deadLetterEvents serves GET /api/events/dead-letters[?vhost=V[&queue=Q]]:
// the dead-letter event stream as Server-Sent Events. Each event is one
// "event: dead_letter" with "id: SEQ" and the event's JSON form as data;
// a loss is one "event: gap" whose data is {"type":"gap","lost":N}. An
// idle stream gets a comment line every heartbeat; the stream ends when
// the client goes or the broker shuts down.
//
// Permissions, as RabbitMQ's consume: the events of one queue need read on
// it (403 otherwise). A vhost's stream needs a read permission in that
// vhost and carries the events of the queues the user may read; without
// vhost, those of every vhost the user can access.
func (s *server) deadLetterEvents(req *request) error {
	if s.events == nil {
		return errorf(http.StatusNotFound, "Object Not Found")
	}
	q := req.r.URL.Query()
	vhost, hasVHost := q.Get("vhost"), q.Has("vhost")
	queue := q.Get("queue")
	if q.Has("queue") && !hasVHost {
		return errorf(http.StatusBadRequest, "queue needs vhost")
	}
	if q.Has("queue") {
		if err := router.ValidateName("queue", queue); err != nil {
			return errorf(http.StatusBadRequest, "%v", err)
		}
	}
	f := dlevents.Filter{VHost: vhost, Queue: queue}
	if hasVHost {
		v, err := s.vhost(req, vhost)
		if err != nil {
			return err
		}
		op := s.operator(req, v)
		if queue != "" {
			if err := forbidden(op.MayReadQueue(queue)); err != nil {
				return err
			}
		} else {
			if err := forbidden(op.MayWatchDeadLetters()); err != nil {
				return err
			}
			f.Allow = func(_, queue string) bool { return op.MayReadQueue(queue) == nil }
		}
	} else {
		// Every vhost: each event is checked against the user's access to
		// its vhost and read permission on its queue.
		f.Allow = func(vhost, queue string) bool {
			v, ok := s.b.VHost(vhost)
			if !ok {
				return false
			}
			op := management.Operator{Auth: s.auth, User: req.user, VHost: v, Token: req.token}
			return op.CanAccessVHost(vhost) && op.MayReadQueue(queue) == nil
		}
	}
	if req.r.Method == http.MethodHead {
		// The headers a GET would get, without opening a stream.
		req.w.Header().Set("Content-Type", "text/event-stream")
		req.w.WriteHeader(http.StatusOK)
		return nil
	}
	ready := make(chan struct{}, 1)
	sub, err := s.events.Subscribe(f, func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	})
	switch {
	case errors.Is(err, dlevents.ErrTooManySubscribers):
		return errorf(http.StatusServiceUnavailable, "%v (limit %d)", err, s.events.MaxSubscribers())
	case err != nil:
		return errorf(http.StatusServiceUnavailable, "%v", err)
	}
	defer sub.Close()

	w := req.w
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	// send writes what bw holds and flushes it to the client; a client
	// that takes nothing for the write time-out ends the stream (its
	// events meanwhile are lost to its buffer, never held by the broker).
	send := func() bool {
		if s.eventsWriteTimeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.eventsWriteTimeout))
		}
		return bw.Flush() == nil && rc.Flush() == nil
	}
	_, _ = bw.WriteString(": epitaph dead-letter events\n\n")
	if !send() {
		return nil
	}
	heartbeat := time.NewTicker(s.eventsHeartbeat)
	defer heartbeat.Stop()
	ctx := req.r.Context()
	var line []byte
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-heartbeat.C:
			_, _ = bw.WriteString(": heartbeat\n\n")
			if !send() {
				return nil
			}
			continue
		case <-ready:
		}
		for {
			it, ok := sub.Next()
			if !ok {
				break
			}
			data, err := it.JSON()
			if err != nil {
				s.log.Error("cannot encode a dead-letter event; skipping it", "err", err)
				continue
			}
			line = line[:0]
			if it.Event != nil {
				line = append(line, "id: "...)
				line = strconv.AppendUint(line, it.Event.Seq, 10)
				line = append(line, "\nevent: "+dlevents.TypeDeadLetter+"\n"...)
			} else {
				line = append(line, "event: "+dlevents.TypeGap+"\n"...)
			}
			line = append(line, "data: "...)
			line = append(line, data...) // JSON has no raw newline
			line = append(line, "\n\n"...)
			_, _ = bw.Write(line)
		}
		if !send() {
			return nil
		}
		if sub.Closed() {
			return nil // the broker is shutting down; what it held was sent
		}
	}
}
