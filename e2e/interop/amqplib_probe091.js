// amqplib_probe091.js drives an AMQP 0-9-1 broker with amqplib (npm) and
// prints one JSON event per line, for e2e/interop/interop091_test.go. The
// operations are those of pika_probe091.py (basic, publish, settle, get).
// Values are printed with the type amqplib decoded them to: string, number,
// boolean, null, Buffer, timestamp ({'!': 'timestamp'}), object, array.
'use strict';
const amqplib = require('amqplib');
const util = require('util');

const a = util.parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '5672' },
    op: { type: 'string' },
    queue: { type: 'string', default: '' },
    dlq: { type: 'string', default: '' },
    message: { type: 'string', default: '{}' },
    action: { type: 'string', default: 'reject' },
    timeout: { type: 'string', default: '10' },
  },
}).values;
const timeoutMs = Number(a.timeout) * 1000;

function emit(o) { process.stdout.write(JSON.stringify(o) + '\n'); }

function typed(v) {
  if (v === null || v === undefined) return { type: 'null', value: null };
  if (Buffer.isBuffer(v)) return { type: 'Buffer', value: v.toString('base64') };
  if (Array.isArray(v)) return { type: 'array', value: v.map(typed) };
  if (typeof v === 'object' && v['!'] === 'timestamp') return { type: 'timestamp', value: v.value };
  if (typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v)) out[k] = typed(v[k]);
    return { type: 'object', keys: Object.keys(v), value: out };
  }
  return { type: typeof v, value: v };
}

function describe(msg) {
  const p = msg.properties;
  const d = {
    exchange: msg.fields.exchange, routing_key: msg.fields.routingKey, redelivered: msg.fields.redelivered,
    body: msg.content.toString('utf8'), properties: {},
  };
  const names = {
    contentType: 'content_type', contentEncoding: 'content_encoding', deliveryMode: 'delivery_mode',
    priority: 'priority', correlationId: 'correlation_id', replyTo: 'reply_to', expiration: 'expiration',
    messageId: 'message_id', timestamp: 'timestamp', type: 'type', userId: 'user_id', appId: 'app_id',
    clusterId: 'cluster_id',
  };
  for (const [k, n] of Object.entries(names)) if (p[k] !== undefined) d.properties[n] = p[k];
  if (p.headers !== undefined) {
    d.header_keys = Object.keys(p.headers);
    d.headers = {};
    for (const k of Object.keys(p.headers)) d.headers[k] = typed(p.headers[k]);
  }
  return d;
}

// headerValue turns --message's {"S": "x"}, {"I": 1}, {"l": 1}, {"T": s},
// {"t": b}, {"A": [..]}, {"F": {..}}, {"x": base64}, {"V": null} into
// amqplib's typed values, so the wire tags are the ones asked for.
function headerValue(spec) {
  const [[tag, v]] = Object.entries(spec);
  switch (tag) {
    case 'S': return v;
    case 'I': return { '!': 'int', value: v };
    case 'l': return { '!': 'long', value: v };
    case 'T': return { '!': 'timestamp', value: v };
    case 't': return Boolean(v);
    case 'A': return v.map(headerValue);
    case 'F': return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, headerValue(x)]));
    case 'x': return Buffer.from(v, 'base64');
    case 'V': return null;
  }
  throw new Error('unknown header tag ' + tag);
}

function options(m) {
  const o = {};
  const names = {
    content_type: 'contentType', content_encoding: 'contentEncoding', delivery_mode: 'deliveryMode',
    priority: 'priority', correlation_id: 'correlationId', reply_to: 'replyTo', expiration: 'expiration',
    message_id: 'messageId', timestamp: 'timestamp', type: 'type', user_id: 'userId', app_id: 'appId',
  };
  for (const [n, k] of Object.entries(names)) if (m[n] !== undefined) o[k] = m[n];
  if (m.headers) o.headers = Object.fromEntries(Object.entries(m.headers).map(([k, v]) => [k, headerValue(v)]));
  o.mandatory = true;
  return o;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function getOne(ch, queue) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await ch.get(queue, { noAck: false });
    if (m) return m;
    if (Date.now() > deadline) { emit({ event: 'timeout', where: 'basic.get on ' + queue }); process.exit(2); }
    await sleep(20);
  }
}

function publishConfirmed(ch, exchange, rk, body, opts) {
  return new Promise((resolve, reject) => {
    ch.publish(exchange, rk, Buffer.from(body), opts, (err) => (err ? reject(err) : resolve()));
  });
}

async function opBasic(conn) {
  const ch = await conn.createConfirmChannel();
  const returned = [];
  ch.on('return', (m) => returned.push(m));
  for (const n of [1, 2, 3]) {
    await publishConfirmed(ch, '', a.queue, 'amqplib ' + n, { messageId: 'amqplib-' + n, deliveryMode: 2, headers: { seq: n }, mandatory: true });
    emit({ event: 'confirmed', id: 'amqplib-' + n });
  }
  await publishConfirmed(ch, '', a.queue + '.nowhere', 'lost', { messageId: 'amqplib-unroutable', mandatory: true });
  // basic.return precedes the confirm of an unroutable mandatory message
  if (returned.length === 1) {
    emit({ event: 'returned', id: returned[0].properties.messageId, reply_code: returned[0].fields.replyCode, reply_text: returned[0].fields.replyText });
  } else {
    emit({ event: 'confirmed', id: 'amqplib-unroutable' });
  }
  await ch.prefetch(10);
  let seen = 0;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => { emit({ event: 'timeout', where: 'consume' }); process.exit(2); }, timeoutMs);
    ch.consume(a.queue, (msg) => {
      const id = msg.properties.messageId;
      emit({ event: 'message', id, redelivered: msg.fields.redelivered, seq: msg.properties.headers.seq, body: msg.content.toString() });
      if (id === 'amqplib-1') { ch.ack(msg); emit({ event: 'acked', id }); }
      else if (id === 'amqplib-2') { ch.reject(msg, false); emit({ event: 'rejected', id }); }
      else if (id === 'amqplib-3' && !msg.fields.redelivered) { ch.nack(msg, false, true); emit({ event: 'requeued', id }); }
      else { ch.nack(msg, false, false); emit({ event: 'nacked', id }); }
      if (++seen === 4) { clearTimeout(timer); resolve(); }
    }, { noAck: false, consumerTag: 'amqplib-basic' }).catch(reject);
  });
  await ch.cancel('amqplib-basic');
  for (let i = 0; i < 2; i++) {
    const m = await getOne(ch, a.dlq);
    emit({ event: 'dead_lettered', id: m.properties.messageId, delivery: describe(m) });
    ch.ack(m);
  }
  await ch.close();
}

async function opPublish(conn) {
  const m = JSON.parse(a.message);
  const ch = await conn.createConfirmChannel();
  await publishConfirmed(ch, m.exchange || '', m.routing_key, m.body || '', options(m));
  emit({ event: 'confirmed', id: m.message_id });
  await ch.close();
}

async function opSettle(conn) {
  const ch = await conn.createChannel();
  const m = await getOne(ch, a.queue);
  if (a.action === 'reject') ch.reject(m, false); else ch.nack(m, false, false);
  emit({ event: a.action + 'ed', delivery: describe(m) });
  await ch.close();
}

async function opGet(conn) {
  const ch = await conn.createChannel();
  const m = await getOne(ch, a.queue);
  emit({ event: 'message', delivery: describe(m) });
  ch.ack(m);
  await ch.close();
}

async function main() {
  const conn = await amqplib.connect({ protocol: 'amqp', hostname: a.host, port: Number(a.port), username: 'guest', password: 'guest', heartbeat: 30 });
  const sp = conn.connection.serverProperties || {};
  emit({ event: 'open', capabilities: Object.keys(sp.capabilities || {}).filter((k) => sp.capabilities[k]).sort() });
  await { basic: opBasic, publish: opPublish, settle: opSettle, get: opGet }[a.op](conn);
  await conn.close();
  emit({ event: 'closed' });
}

main().catch((e) => { emit({ event: 'error', where: a.op, error: e.name, description: String(e && e.message) }); process.exit(1); });
