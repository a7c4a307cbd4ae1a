"""proton_probe.py drives one queue of an AMQP 1.0 broker with Qpid Proton
(python3-qpid-proton 0.37, run with /usr/bin/python3) and prints one JSON
object per line on stdout for interop_test.go:

  publish m1, consume it, accept it;
  publish m2, consume it, reject it with a condition;
  publish m3, consume it, release it, consume it again, accept it; close.

Events are the same as rhea_probe.js: open, sent, message, accepted,
rejected, released, closed; on failure "error" and exit 1, on timeout
"timeout" and exit 2.

Usage: /usr/bin/python3 proton_probe.py --port 5672 --queue q [--host 127.0.0.1] [--timeout 10]
Proton always negotiates SASL; with no user in the URL it uses ANONYMOUS.
"""
import argparse
import json
import sys

from proton import Condition, Delivery, Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container

TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'


def emit(**event):
    sys.stdout.write(json.dumps(event, default=str, sort_keys=True) + '\n')
    sys.stdout.flush()


def plain(d):
    """Turns proton annotation/property dicts (symbol keys) into JSON-able dicts."""
    return {str(k): v for k, v in (d or {}).items()}


class Probe(MessagingHandler):
    def __init__(self, url, address, timeout):
        # prefetch=0: credit is issued by hand, one message at a time, after
        # each settlement (proton's prefetch=1 controller does not top up
        # reliably when the application settles later).
        super().__init__(auto_accept=False, prefetch=0)
        self.url, self.address, self.timeout = url, address, timeout
        self.conn = self.sender = self.receiver = self.timer = None
        self.pending = []
        self.seq = 0
        self.seen = {}
        self.exit_code = None

    def finish(self, code):
        if self.exit_code is None:
            self.exit_code = code
        if self.timer:
            self.timer.cancel()
            self.timer = None

    def fail(self, where, cond=None):
        emit(event='error', where=where,
             error=cond.name if cond else None, description=cond.description if cond else None)
        self.finish(1)
        if self.conn:
            self.conn.close()
        self.container.stop()

    def on_start(self, e):
        self.container = e.container
        self.timer = e.container.schedule(self.timeout, self)
        self.conn = e.container.connect(self.url, allowed_mechs='ANONYMOUS', reconnect=False)
        self.receiver = e.container.create_receiver(self.conn, self.address)
        self.receiver.flow(1)
        self.sender = e.container.create_sender(self.conn, self.address)
        self.publish()

    def on_timer_task(self, e):
        emit(event='timeout', after_s=self.timeout)
        self.timer = None
        self.finish(2)
        e.container.stop()

    def on_connection_opened(self, e):
        emit(event='open', container_id=e.connection.remote_container)

    def publish(self):
        self.seq += 1
        n = self.seq
        self.pending.append(Message(
            id='proton-%d' % n, durable=True, body='hello from proton %d' % n,
            annotations={symbol('x-opt-probe'): 'proton', symbol('x-opt-seq'): n},
            properties={'traceparent': TRACEPARENT, 'seq': n}))
        self.flush()

    def flush(self):
        while self.sender and self.pending and self.sender.credit > 0:
            m = self.pending.pop(0)
            d = self.sender.send(m)
            d.probe_id = m.id

    def on_sendable(self, e):
        self.flush()

    def on_accepted(self, e):
        emit(event='sent', id=getattr(e.delivery, 'probe_id', None), outcome='accepted')

    def on_rejected(self, e):
        self.fail('send %s rejected' % getattr(e.delivery, 'probe_id', None), e.delivery.remote.condition)

    def on_released(self, e):
        self.fail('send %s released/modified' % getattr(e.delivery, 'probe_id', None))

    def on_message(self, e):
        m, d = e.message, e.delivery
        mid = str(m.id)
        self.seen[mid] = self.seen.get(mid, 0) + 1
        emit(event='message', id=mid, body=m.body, delivery_count=m.delivery_count,
             first_acquirer=bool(m.first_acquirer), annotations=plain(m.annotations),
             application_properties=plain(m.properties))
        if mid == 'proton-1':
            self.accept(d)
            emit(event='accepted', id=mid)
            e.receiver.flow(1)
            self.publish()
        elif mid == 'proton-2':
            d.local.condition = Condition('amqp:internal-error', 'rejected by proton_probe')
            d.update(Delivery.REJECTED)
            d.settle()
            emit(event='rejected', id=mid)
            e.receiver.flow(1)
            self.publish()
        elif mid == 'proton-3' and self.seen[mid] == 1:
            # Not self.release(d): its default sends modified{delivery-failed}.
            d.update(Delivery.RELEASED)
            d.settle()
            emit(event='released', id=mid)
            e.receiver.flow(1)
        elif mid == 'proton-3':
            self.accept(d)
            emit(event='accepted', id=mid)
            self.conn.close()
        else:
            self.fail('unexpected message ' + mid)

    def on_connection_closed(self, e):
        emit(event='closed')
        self.finish(0)

    def on_connection_error(self, e):
        self.fail('connection', e.connection.remote_condition)

    def on_session_error(self, e):
        self.fail('session', e.session.remote_condition)

    def on_link_error(self, e):
        self.fail('link', e.link.remote_condition)

    def on_transport_error(self, e):
        if self.exit_code is None:
            self.fail('transport', e.transport.condition)

    def on_disconnected(self, e):
        if self.exit_code is None:
            self.fail('disconnected')


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', default='5672')
    p.add_argument('--queue', default='interop-proton')
    p.add_argument('--timeout', type=float, default=10.0, help='seconds')
    a = p.parse_args()
    probe = Probe('amqp://%s:%s' % (a.host, a.port), '/queues/' + a.queue, a.timeout)
    try:
        Container(probe).run()
    except Exception as ex:  # a probe bug or a broker that breaks the client
        emit(event='error', where='container', error=repr(ex))
        return 1
    return 1 if probe.exit_code is None else probe.exit_code


if __name__ == '__main__':
    sys.exit(main())
