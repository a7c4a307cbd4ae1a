// rhea_common.js is what the rhea probes (rhea_probe.js, rhea_dl_probe.js)
// share: the JSON event output, the time-out, the exit, and the
// connection's failure handlers.
'use strict';
const rhea = require('rhea');
const util = require('util');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// start connects to host:port as container id and arms the time-out (ms).
// It returns the connection and finish(code), which ends the process once
// stdout has drained; failures (and a socket closed before finish) emit an
// "error" event and exit 1, the time-out a "timeout" event and exit 2, a
// connection closed by the broker a "closed" event and exit 0.
function start(id, host, port, timeoutMs) {
  let finished = false;
  let timer;
  function finish(code) {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    process.stdout.write('', () => process.exit(code));
  }
  function fail(what, err) {
    emit({ event: 'error', where: what, error: err ? String(err.condition || err.message || util.inspect(err)) : null,
      description: err && err.description ? String(err.description) : undefined });
    finish(1);
  }
  timer = setTimeout(() => {
    emit({ event: 'timeout', after_ms: timeoutMs });
    finish(2);
  }, timeoutMs);

  const conn = rhea.create_container({ id: id }).connect({ host: host, port: Number(port), reconnect: false });
  conn.on('connection_close', () => {
    emit({ event: 'closed' });
    finish(0);
  });
  conn.on('connection_error', (ctx) => fail('connection', ctx.connection.error));
  conn.on('receiver_error', (ctx) => fail('receiver', ctx.receiver.error));
  conn.on('sender_error', (ctx) => fail('sender', ctx.sender.error));
  conn.on('session_error', (ctx) => fail('session', ctx.session.error));
  conn.on('protocol_error', (ctx) => fail('protocol', ctx.error));
  conn.on('error', (ctx) => fail('error', ctx.error));
  conn.on('disconnected', (ctx) => {
    if (!finished) fail('disconnected', ctx.error || { message: 'socket closed before the probe finished' });
  });
  return { conn: conn, fail: fail };
}

module.exports = { emit, start };
