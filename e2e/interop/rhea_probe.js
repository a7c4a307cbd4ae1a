// rhea_probe.js drives one queue of an AMQP 1.0 broker with the rhea client
// (npm rhea@3.0.5) and prints one JSON object per line on stdout for
// interop_test.go:
//
//   publish m1, consume it, accept it;
//   publish m2, consume it, reject it with a condition;
//   publish m3, consume it, release it, consume it again, accept it; close.
//
// Events: {"event":"open"}, {"event":"sent","id","outcome"},
// {"event":"message","id","body","delivery_count","first_acquirer",
// "annotations","application_properties"}, {"event":"accepted"|"rejected"|
// "released","id"}, {"event":"closed"}; on failure {"event":"error",...} and
// exit 1, on timeout {"event":"timeout"} and exit 2.
//
// Usage: node rhea_probe.js --port 5672 --queue q [--host 127.0.0.1] [--timeout 10000]
// No username is given, so rhea opens the connection without a SASL layer.
'use strict';
const { emit, start } = require('./rhea_common');
const util = require('util');

const args = util.parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '5672' },
    queue: { type: 'string', default: 'interop-rhea' },
    timeout: { type: 'string', default: '10000' },
  },
}).values;
const address = '/queues/' + args.queue;
const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';


const { conn, fail } = start('epitaph-rhea-probe', args.host, args.port, Number(args.timeout));

let sender;
const pending = []; // messages waiting for link credit
let seq = 0;
const seen = {}; // message id -> number of deliveries

function publish(n) {
  pending.push({
    message_id: 'rhea-' + n,
    durable: true,
    message_annotations: { 'x-opt-probe': 'rhea', 'x-opt-seq': n },
    application_properties: { traceparent: traceparent, seq: n },
    body: 'hello from rhea ' + n,
  });
  flush();
}
function flush() {
  while (sender && pending.length > 0 && sender.sendable()) {
    const m = pending.shift();
    const d = sender.send(m);
    d.probe_id = m.message_id;
  }
}

conn.on('connection_open', (ctx) => {
  emit({ event: 'open', container_id: ctx.connection.remote.open ? ctx.connection.remote.open.container_id : null });
  ctx.connection.open_receiver({ source: address, autoaccept: false, credit_window: 1 });
  sender = ctx.connection.open_sender({ target: address });
  sender.on('sendable', flush);
  sender.on('accepted', (c) => emit({ event: 'sent', id: c.delivery.probe_id, outcome: 'accepted' }));
  sender.on('rejected', (c) => fail('send ' + c.delivery.probe_id + ' rejected', c.delivery.remote_state && c.delivery.remote_state.error));
  sender.on('released', (c) => fail('send ' + c.delivery.probe_id + ' released/modified'));
  publish(++seq);
});

conn.on('message', (ctx) => {
  const m = ctx.message;
  const id = String(m.message_id);
  seen[id] = (seen[id] || 0) + 1;
  emit({
    event: 'message',
    id: id,
    body: m.body,
    delivery_count: m.delivery_count === undefined ? 0 : m.delivery_count,
    first_acquirer: m.first_acquirer === undefined ? false : m.first_acquirer,
    annotations: m.message_annotations || {},
    application_properties: m.application_properties || {},
  });
  if (id === 'rhea-1') {
    ctx.delivery.accept();
    emit({ event: 'accepted', id: id });
    publish(++seq);
  } else if (id === 'rhea-2') {
    ctx.delivery.reject({ condition: 'amqp:internal-error', description: 'rejected by rhea_probe' });
    emit({ event: 'rejected', id: id });
    publish(++seq);
  } else if (id === 'rhea-3' && seen[id] === 1) {
    ctx.delivery.release(); // released: requeue, not a failed attempt
    emit({ event: 'released', id: id });
  } else if (id === 'rhea-3') {
    ctx.delivery.accept();
    emit({ event: 'accepted', id: id });
    ctx.connection.close();
  } else {
    fail('unexpected message ' + id);
  }
});
