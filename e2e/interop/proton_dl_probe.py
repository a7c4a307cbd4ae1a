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
import json
import sys

from proton import Array, Condition, Data, Delivery, Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container


def emit(**event):
    sys.stdout.write(json.dumps(event, default=str, sort_keys=True) + '\n')
    sys.stdout.flush()


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


class Probe(MessagingHandler):
    def __init__(self, url, queue, dlq, timeout):
        super().__init__(auto_accept=False, prefetch=0)
        self.url, self.queue, self.dlq, self.timeout = url, queue, dlq, timeout
        self.conn = self.sender = self.timer = None
        self.sent = False
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
        self.src = e.container.create_receiver(self.conn, '/queues/' + self.queue, name='src')
        self.src.flow(1)
        self.sender = e.container.create_sender(self.conn, '/queues/' + self.queue)

    def on_timer_task(self, e):
        emit(event='timeout', after_s=self.timeout)
        self.timer = None
        self.finish(2)
        e.container.stop()

    def on_connection_opened(self, e):
        emit(event='open', container_id=e.connection.remote_container)

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
    p.add_argument('--queue', default='interop-proton-dl')
    p.add_argument('--dlq', default='interop-proton-dlq')
    p.add_argument('--timeout', type=float, default=10.0, help='seconds')
    a = p.parse_args()
    probe = Probe('amqp://%s:%s' % (a.host, a.port), a.queue, a.dlq, a.timeout)
    try:
        Container(probe).run()
    except Exception as ex:  # a probe bug or a broker that breaks the client
        emit(event='error', where='container', error=repr(ex))
        return 1
    return 1 if probe.exit_code is None else probe.exit_code


if __name__ == '__main__':
    sys.exit(main())
