"""pika_probe091.py drives an AMQP 0-9-1 broker with pika (Debian's
python3-pika, run with /usr/bin/python3) and prints one JSON event per
line, for e2e/interop/interop091_test.go.

Operations (--op):
  basic    confirms, a mandatory publish that is returned, consume with
           prefetch; ack, reject(requeue=false), nack(requeue=true) then
           nack(requeue=false); the two dead letters read back from --dlq
  publish  publish one message described by --message (JSON), with confirms
  settle   take one message from --queue and reject or nack it (--action)
  get      take one message from --queue, print it with its header types,
           and ack it

Every value is printed with the Python type pika decoded it to (str, bytes,
int, float, bool, datetime, dict, list, None), so the test can check the
field-table types the broker sent.
"""
import argparse
import base64
import datetime
import json
import sys
import time

import pika

p = argparse.ArgumentParser()
p.add_argument('--host', default='127.0.0.1')
p.add_argument('--port', type=int, default=5672)
p.add_argument('--op', required=True)
p.add_argument('--queue', default='')
p.add_argument('--dlq', default='')
p.add_argument('--message', default='{}')
p.add_argument('--action', default='reject')
p.add_argument('--timeout', type=float, default=10.0)
a = p.parse_args()


def emit(**kw):
    print(json.dumps(kw, sort_keys=True), flush=True)


def typed(v):
    """A JSON description of a decoded field value: its Python type and value."""
    if isinstance(v, bool):
        return {'type': 'bool', 'value': v}
    if isinstance(v, int):
        return {'type': 'int', 'value': v}
    if isinstance(v, float):
        return {'type': 'float', 'value': v}
    if isinstance(v, str):
        return {'type': 'str', 'value': v}
    if isinstance(v, bytes):
        return {'type': 'bytes', 'value': base64.b64encode(v).decode()}
    if isinstance(v, datetime.datetime):
        return {'type': 'datetime', 'value': int(v.replace(tzinfo=datetime.timezone.utc).timestamp())}
    if v is None:
        return {'type': 'None', 'value': None}
    if isinstance(v, dict):
        return {'type': 'dict', 'keys': list(v.keys()), 'value': {k: typed(x) for k, x in v.items()}}
    if isinstance(v, list):
        return {'type': 'list', 'value': [typed(x) for x in v]}
    return {'type': type(v).__name__, 'value': repr(v)}


def describe(method, props, body):
    """The whole delivery: method fields, basic properties, typed headers, body."""
    d = {
        'exchange': method.exchange,
        'routing_key': method.routing_key,
        'redelivered': method.redelivered,
        'body': body.decode('utf-8', 'replace'),
        'properties': {},
    }
    for name in ('content_type', 'content_encoding', 'delivery_mode', 'priority', 'correlation_id',
                 'reply_to', 'expiration', 'message_id', 'timestamp', 'type', 'user_id', 'app_id',
                 'cluster_id'):
        v = getattr(props, name)
        if v is not None:
            d['properties'][name] = v
    if props.headers is not None:
        d['header_keys'] = list(props.headers.keys())
        d['headers'] = {k: typed(v) for k, v in props.headers.items()}
    return d


def decode_header_value(spec):
    """Header values in --message: {"S": "x"} longstr, {"I": 1} an integer
    (pika writes it as I when it fits in 32 bits, else l), {"T": secs},
    {"t": true}, {"A": [...]}, {"F": {...}}, {"x": base64}, {"V": null}."""
    (tag, v), = spec.items()
    if tag == 'S':
        return v
    if tag in ('I', 'l'):
        return v
    if tag == 'T':
        return datetime.datetime.fromtimestamp(v, datetime.timezone.utc)
    if tag == 't':
        return bool(v)
    if tag == 'A':
        return [decode_header_value(x) for x in v]
    if tag == 'F':
        return {k: decode_header_value(x) for k, x in v.items()}
    if tag == 'x':
        return base64.b64decode(v)
    if tag == 'V':
        return None
    raise ValueError('unknown header tag %r' % tag)


def connect():
    params = pika.ConnectionParameters(host=a.host, port=a.port, heartbeat=30,
                                       blocked_connection_timeout=a.timeout,
                                       socket_timeout=a.timeout, connection_attempts=1)
    conn = pika.BlockingConnection(params)
    emit(event='open', server_product=str(conn._impl.server_properties.get('product', '')),
         capabilities=sorted(k for k, v in conn._impl.server_properties.get('capabilities', {}).items() if v))
    return conn


def get_one(ch, queue):
    """basic.get until a message arrives or the timeout passes."""
    deadline = time.monotonic() + a.timeout
    while True:
        method, props, body = ch.basic_get(queue, auto_ack=False)
        if method is not None:
            return method, props, body
        if time.monotonic() > deadline:
            emit(event='timeout', where='basic.get on ' + queue)
            sys.exit(2)
        time.sleep(0.02)


def properties(m):
    headers = None
    if 'headers' in m:
        headers = {k: decode_header_value(v) for k, v in m['headers'].items()}
    return pika.BasicProperties(
        content_type=m.get('content_type'), content_encoding=m.get('content_encoding'),
        delivery_mode=m.get('delivery_mode'), priority=m.get('priority'),
        correlation_id=m.get('correlation_id'), reply_to=m.get('reply_to'),
        expiration=m.get('expiration'), message_id=m.get('message_id'),
        timestamp=m.get('timestamp'), type=m.get('type'), user_id=m.get('user_id'),
        app_id=m.get('app_id'), headers=headers)


def op_basic(conn):
    ch = conn.channel()
    ch.confirm_delivery()
    for n in (1, 2, 3):
        ch.basic_publish('', a.queue, ('pika %d' % n).encode(),
                         pika.BasicProperties(message_id='pika-%d' % n, delivery_mode=2,
                                              headers={'seq': n}), mandatory=True)
        emit(event='confirmed', id='pika-%d' % n)
    try:
        ch.basic_publish('', a.queue + '.nowhere', b'lost', pika.BasicProperties(message_id='pika-unroutable'),
                         mandatory=True)
        emit(event='confirmed', id='pika-unroutable')
    except pika.exceptions.UnroutableError as e:
        emit(event='returned', id='pika-unroutable', reply_code=e.messages[0].method.reply_code,
             reply_text=e.messages[0].method.reply_text)
    ch.basic_qos(prefetch_count=10)
    seen = []
    deadline = time.monotonic() + a.timeout
    for method, props, body in ch.consume(a.queue, auto_ack=False, inactivity_timeout=0.2):
        if method is None:
            if time.monotonic() > deadline:
                emit(event='timeout', where='consume')
                sys.exit(2)
            continue
        mid = props.message_id
        emit(event='message', id=mid, redelivered=method.redelivered, seq=props.headers.get('seq'),
             body=body.decode())
        if mid == 'pika-1':
            ch.basic_ack(method.delivery_tag)
            emit(event='acked', id=mid)
        elif mid == 'pika-2':
            ch.basic_reject(method.delivery_tag, requeue=False)
            emit(event='rejected', id=mid)
        elif mid == 'pika-3' and not method.redelivered:
            ch.basic_nack(method.delivery_tag, multiple=False, requeue=True)
            emit(event='requeued', id=mid)
        else:
            ch.basic_nack(method.delivery_tag, multiple=False, requeue=False)
            emit(event='nacked', id=mid)
        seen.append(mid)
        if len(seen) == 4:
            break
    ch.cancel()
    for _ in range(2):
        method, props, body = get_one(ch, a.dlq)
        emit(event='dead_lettered', id=props.message_id, delivery=describe(method, props, body))
        ch.basic_ack(method.delivery_tag)
    ch.close()


def op_publish(conn):
    m = json.loads(a.message)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish(m.get('exchange', ''), m['routing_key'], m.get('body', '').encode(), properties(m),
                     mandatory=True)
    emit(event='confirmed', id=m.get('message_id'))
    ch.close()


def op_settle(conn):
    ch = conn.channel()
    method, props, body = get_one(ch, a.queue)
    if a.action == 'reject':
        ch.basic_reject(method.delivery_tag, requeue=False)
    else:
        ch.basic_nack(method.delivery_tag, multiple=False, requeue=False)
    emit(event=a.action + 'ed', delivery=describe(method, props, body))
    ch.close()


def op_get(conn):
    ch = conn.channel()
    method, props, body = get_one(ch, a.queue)
    emit(event='message', delivery=describe(method, props, body))
    ch.basic_ack(method.delivery_tag)
    ch.close()


def main():
    conn = connect()
    {'basic': op_basic, 'publish': op_publish, 'settle': op_settle, 'get': op_get}[a.op](conn)
    conn.close()
    emit(event='closed')


try:
    main()
except Exception as e:  # every failure is one JSON line and exit 1
    emit(event='error', where=a.op, error=type(e).__name__, description=str(e))
    sys.exit(1)
