"""proton_selector_probe.py attaches a Qpid Proton consumer with a JMS
selector (apache.org:selector-filter:string, as Proton's Selector option
sends it) and prints the filter of the source in the broker's attach reply,
for interop_test.go. AMQP 1.0 section 3.5.3: the reply carries only the
filters in force.

Events: open, attached {filter: the reply source's filter as a dict, or
null}, closed; on failure "error" and exit 1, on timeout "timeout" and exit 2.

Usage: /usr/bin/python3 proton_selector_probe.py --port 5672 --queue q [--host 127.0.0.1] [--timeout 10]
"""
import argparse
import sys

from proton.reactor import Selector

import proton_common
from proton_common import emit


class Probe(proton_common.Probe):
    def __init__(self, url, queue, timeout):
        super().__init__(url, timeout)
        self.queue = queue

    def on_start(self, e):
        self.connect(e)
        e.container.create_receiver(self.conn, self.queue, options=Selector("colour = 'red'"))

    def on_link_opened(self, e):
        if not e.link.is_receiver:
            return
        d = e.link.remote_source.filter  # a Data whose cursor starts before its first value
        d.rewind()
        f = d.get_object() if d.next() is not None else None
        emit(event='attached', filter={str(k): str(v) for k, v in f.items()} if f else None)
        e.link.close()
        self.conn.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--queue', required=True)
    p.add_argument('--timeout', type=float, default=10)
    a = p.parse_args()
    return proton_common.run(Probe('amqp://%s:%d' % (a.host, a.port), a.queue, a.timeout))


if __name__ == '__main__':
    sys.exit(main())
