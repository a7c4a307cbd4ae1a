// rhea_dl_probe.js checks dead-lettering with the rhea client (npm
// rhea@3.0.5) and prints one JSON object per line on stdout for
// interop_test.go:
//
//   publish m to --queue (a queue with a dead-letter exchange), consume it,
//   reject it with a condition; consume the dead-lettered copy from --dlq,
//   print the x-opt-deaths it got, accept it; close.
//
// Events: {"event":"open"}, {"event":"sent"}, {"event":"rejected"},
// {"event":"dead_lettered","id","body","delivery_count","first_acquirer",
// "ttl","deaths","annotations"}, {"event":"accepted"}, {"event":"closed"};
// on failure {"event":"error",...} and exit 1, on timeout
// {"event":"timeout"} and exit 2.
//
// rhea turns symbols into strings and timestamps into Dates, so every death
// field is printed as {"js_type": "string"|"number"|"Date"|"Array"|...,
// "value": ...} with Dates as milliseconds since the epoch.
//
// Usage: node rhea_dl_probe.js --port 5672 --queue q --dlq dlq [--host 127.0.0.1] [--timeout 10000]
'use strict';
const { emit, start } = require('./rhea_common');
const util = require('util');

const args = util.parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '5672' },
    queue: { type: 'string', default: 'interop-rhea-dl' },
    dlq: { type: 'string', default: 'interop-rhea-dlq' },
    timeout: { type: 'string', default: '10000' },
  },
}).values;


function jsType(v) {
  if (v instanceof Date) return 'Date';
  if (Array.isArray(v)) return 'Array';
  if (v === null) return 'null';
  return typeof v;
}

function describeField(v) {
  if (v instanceof Date) return { js_type: 'Date', value: v.getTime() };
  if (Array.isArray(v)) return { js_type: 'Array', value: v, element_js_types: v.map(jsType) };
  return { js_type: jsType(v), value: v };
}

const { conn, fail } = start('epitaph-rhea-dl-probe', args.host, args.port, Number(args.timeout));

conn.on('connection_open', (ctx) => {
  emit({ event: 'open' });
  ctx.connection.open_receiver({ source: '/queues/' + args.queue, autoaccept: false, credit_window: 1, name: 'src' });
  const sender = ctx.connection.open_sender({ target: '/queues/' + args.queue });
  let sent = false;
  sender.on('sendable', () => {
    if (sent) return;
    sent = true;
    sender.send({ message_id: 'rhea-dl', durable: true, body: 'dead-letter me',
      message_annotations: { 'x-opt-probe': 'rhea' } });
  });
  sender.on('accepted', () => emit({ event: 'sent', id: 'rhea-dl', outcome: 'accepted' }));
  sender.on('rejected', (c) => fail('send rejected', c.delivery.remote_state && c.delivery.remote_state.error));
  sender.on('released', () => fail('send released/modified'));
});

conn.on('message', (ctx) => {
  const m = ctx.message;
  const id = String(m.message_id);
  if (ctx.receiver.name === 'src') {
    ctx.delivery.reject({ condition: 'app:bad-order', description: 'rejected by rhea_dl_probe' });
    emit({ event: 'rejected', id: id });
    ctx.connection.open_receiver({ source: '/queues/' + args.dlq, autoaccept: false, credit_window: 1, name: 'dlq' });
    return;
  }
  const anns = m.message_annotations || {};
  const raw = anns['x-opt-deaths'];
  const deaths = Array.isArray(raw)
    ? raw.map((d) => { const o = {}; for (const k of Object.keys(d)) o[k] = describeField(d[k]); return o; })
    : { js_type: jsType(raw), value: raw === undefined ? null : raw };
  const others = {};
  for (const k of Object.keys(anns)) if (k !== 'x-opt-deaths') others[k] = describeField(anns[k]);
  emit({
    event: 'dead_lettered',
    id: id,
    body: m.body,
    delivery_count: m.delivery_count === undefined ? 0 : m.delivery_count,
    first_acquirer: m.first_acquirer === undefined ? false : m.first_acquirer,
    ttl: m.ttl === undefined ? null : m.ttl,
    deaths: deaths,
    annotations: others,
  });
  ctx.delivery.accept();
  emit({ event: 'accepted', id: id });
  ctx.connection.close();
});
