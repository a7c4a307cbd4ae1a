// rhea_mgmt_probe.js declares a queue through the /management node (RabbitMQ
// 4's HTTP over AMQP, the link pair the official clients use) with the rhea
// client (npm rhea@3.0.5), and prints the reply as rhea decodes it, for
// interop_test.go: rhea reads a tagged boolean (0x56 0x01) as the number 1
// and true/false (0x41/0x42) as booleans, so the values show which encoding
// the broker chose.
//
// Events: {"event":"open"}, {"event":"reply","subject","fields"} with each
// body value as {"value","type"} (type: JavaScript's typeof),
// {"event":"closed"}; on failure {"event":"error",...} and exit 1, on
// timeout {"event":"timeout"} and exit 2.
//
// Usage: node rhea_mgmt_probe.js --port 5672 --queue q [--host 127.0.0.1] [--timeout 10000]
'use strict';
const { emit, start } = require('./rhea_common');
const util = require('util');

const args = util.parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '5672' },
    queue: { type: 'string', default: 'interop-rhea-mgmt' },
    timeout: { type: 'string', default: '10000' },
  },
}).values;

const { conn, fail } = start('rhea-mgmt-probe', args.host, args.port, Number(args.timeout));
const linkName = 'management-link-pair';
const paired = { paired: true };
const sender = conn.open_sender({ name: linkName, target: { address: '/management' }, properties: paired,
  snd_settle_mode: 1 });
const receiver = conn.open_receiver({ name: linkName, source: { address: '/management' }, properties: paired,
  rcv_settle_mode: 0, autoaccept: true });
// rhea keeps a session's links by name, and a link pair's halves share
// one (RabbitMQ pairs them by name): the receiver has replaced the sender
// there. Keep the sender under another key, so that rhea attaches it, and
// hand the broker's attach of each half to the half of the other role.
const session = sender.session;
session.links[linkName + ' (sender)'] = sender;
const onAttach = session.on_attach.bind(session);
session.on_attach = function (frame) {
  const p = frame.performative;
  if (p.name !== linkName) return onAttach(frame);
  const link = p.role ? sender : receiver; // role true: the broker receives, so ours is the sender
  this.remote.handles[p.handle] = link;
  link.on_attach(frame);
  link.remote.attach = p;
};

conn.on('connection_open', () => emit({ event: 'open' }));
let sent = false;
function request() {
  if (sent || !sender.is_open() || !receiver.is_open()) return;
  sent = true;
  sender.send({
    message_id: 'rhea-mgmt-1',
    to: '/queues/' + encodeURIComponent(args.queue),
    subject: 'PUT',
    reply_to: '$me',
    body: { durable: true, exclusive: false, auto_delete: false, arguments: {} },
  });
}
sender.on('sendable', request);
receiver.on('receiver_open', request);
receiver.on('message', (ctx) => {
  const m = ctx.message;
  const body = {};
  for (const [k, v] of Object.entries(m.body || {})) {
    body[k] = { value: typeof v === 'object' ? null : v, type: typeof v };
  }
  emit({ event: 'reply', subject: m.subject, fields: body });
  conn.close();
});
receiver.on('receiver_error', (ctx) => fail('receiver', ctx.receiver.error));
