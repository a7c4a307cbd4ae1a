"""proton_dl_probe.py checks dead-lettering with Qpid Proton
(python3-qpid-proton 0.37, run with /usr/bin/python3) and prints one JSON
object per line on stdout for interop_test.go:

  publish m to --queue (a queue with a dead-letter exchange), consume it,
  reject it with a condition; consume the dead-lettered copy from --dlq,
  print its x-opt-deaths with the Python type of every value, accept; close.

Events: open, sent, rejected, dead_lettered {id, body, delivery_count,
first_acquirer, ttl, deaths, annotations}, accepted, closed; on failure
"error" and exit 1, on timeout "timeout" and exit 2.

Each value is printed as {"type": <type name>, "value": ...}; arrays as
{"type": "Array", "element_type": <AMQP type name>, "elements": [...]},
maps as {"type": "dict", "entries": [[key, value], ...]} in decoded order.

Usage: /usr/bin/python3 proton_dl_probe.py --port 5672 --queue q --dlq dlq [--host 127.0.0.1] [--timeout 10]
"""
import argparse
import sys

from proton import Array, Condition, Data, Delivery, Message, symbol

import proton_common
from proton_common import emit


def describe(v):
    """Describes a decoded AMQP value with its Python type, recursively."""
    if isinstance(v, Array):
        return {'type': 'Array', 'element_type': Data.type_name(v.type),
                'elements': [describe(e) for e in v.elements]}
    if isinstance(v, dict):
        return {'type': 'dict', 'entries': [[describe(k), describe(x)] for k, x in v.items()]}
    if isinstance(v, (list, tuple)):
        return {'type': type(v).__name__, 'elements': [describe(e) for e in v]}
    return {'type': type(v).__name__, 'value': v}


class Probe(proton_common.Probe):
    def __init__(self, url, queue, dlq, timeout):
        super().__init__(url, timeout)
        self.queue, self.dlq = queue, dlq
        self.sent = False

    def on_start(self, e):
        self.connect(e)
        self.src = e.container.create_receiver(self.conn, '/queues/' + self.queue, name='src')
        self.src.flow(1)
        self.sender = e.container.create_sender(self.conn, '/queues/' + self.queue)

    def on_sendable(self, e):
        if not self.sent and e.sender.credit > 0:
            self.sent = True
            e.sender.send(Message(id='proton-dl', durable=True, body='dead-letter me',
                                  annotations={symbol('x-opt-probe'): 'proton'}))

    def on_accepted(self, e):
        if e.delivery.link.is_sender:
            emit(event='sent', id='proton-dl', outcome='accepted')

    def on_rejected(self, e):
        self.fail('send rejected', e.delivery.remote.condition)

    def on_released(self, e):
        self.fail('send released/modified')

    def on_message(self, e):
        m, d = e.message, e.delivery
        if e.receiver.name == 'src':
            d.local.condition = Condition('app:bad-order', 'rejected by proton_dl_probe')
            d.update(Delivery.REJECTED)
            d.settle()
            emit(event='rejected', id=str(m.id))
            r = e.container.create_receiver(self.conn, '/queues/' + self.dlq, name='dlq')
            r.flow(1)
            return
        anns = m.annotations or {}
        emit(event='dead_lettered', id=str(m.id), body=m.body, delivery_count=m.delivery_count,
             first_acquirer=bool(m.first_acquirer), ttl=m.ttl,
             deaths=describe(anns.get(symbol('x-opt-deaths'))),
             annotations={str(k): describe(v) for k, v in anns.items() if str(k) != 'x-opt-deaths'})
        self.accept(d)
        emit(event='accepted', id=str(m.id))
        self.conn.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', default='5672')
    p.add_argument('--queue', default='interop-proton-dl')
    p.add_argument('--dlq', default='interop-proton-dlq')
    p.add_argument('--timeout', type=float, default=10.0, help='seconds')
    a = p.parse_args()
    probe = Probe('amqp://%s:%s' % (a.host, a.port), a.queue, a.dlq, a.timeout)
    return proton_common.run(probe)


if __name__ == '__main__':
    sys.exit(main())
