"""proton_common.py is what the Qpid Proton probes (proton_probe.py,
proton_dl_probe.py) share: the JSON event output, the time-out, the
failure handlers and the run loop. Each probe subclasses Probe and adds
its own on_start, on_sendable and on_message.
"""
import json
import sys

from proton.handlers import MessagingHandler
from proton.reactor import Container


def emit(**event):
    sys.stdout.write(json.dumps(event, default=str, sort_keys=True) + '\n')
    sys.stdout.flush()


class Probe(MessagingHandler):
    def __init__(self, url, timeout):
        # prefetch=0: credit is issued by hand, one message at a time, after
        # each settlement (proton's prefetch=1 controller does not top up
        # reliably when the application settles later).
        super().__init__(auto_accept=False, prefetch=0)
        self.url, self.timeout = url, timeout
        self.conn = self.sender = self.timer = self.container = None
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

    def connect(self, e):
        """Starts the time-out and opens the connection (SASL ANONYMOUS)."""
        self.container = e.container
        self.timer = e.container.schedule(self.timeout, self)
        self.conn = e.container.connect(self.url, allowed_mechs='ANONYMOUS', reconnect=False)

    def on_timer_task(self, e):
        emit(event='timeout', after_s=self.timeout)
        self.timer = None
        self.finish(2)
        e.container.stop()

    def on_connection_opened(self, e):
        emit(event='open', container_id=e.connection.remote_container)

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


def run(probe):
    """Runs probe to its end and returns the process exit code."""
    try:
        Container(probe).run()
    except Exception as ex:  # a probe bug or a broker that breaks the client
        emit(event='error', where='container', error=repr(ex))
        return 1
    return 1 if probe.exit_code is None else probe.exit_code
