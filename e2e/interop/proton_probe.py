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
import sys

from proton import Condition, Delivery, Message, symbol

import proton_common
from proton_common import emit

TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'


def plain(d):
    """Turns proton annotation/property dicts (symbol keys) into JSON-able dicts."""
    return {str(k): v for k, v in (d or {}).items()}


class Probe(proton_common.Probe):
    def __init__(self, url, address, timeout):
        super().__init__(url, timeout)
        self.address = address
        self.receiver = None
        self.pending = []
        self.seq = 0
        self.seen = {}

    def on_start(self, e):
        self.connect(e)
        self.receiver = e.container.create_receiver(self.conn, self.address)
        self.receiver.flow(1)
        self.sender = e.container.create_sender(self.conn, self.address)
        self.publish()

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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', default='5672')
    p.add_argument('--queue', default='interop-proton')
    p.add_argument('--timeout', type=float, default=10.0, help='seconds')
    a = p.parse_args()
    probe = Probe('amqp://%s:%s' % (a.host, a.port), '/queues/' + a.queue, a.timeout)
    return proton_common.run(probe)


if __name__ == '__main__':
    sys.exit(main())
