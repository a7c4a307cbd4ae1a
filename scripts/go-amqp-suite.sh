#!/usr/bin/env bash
# go-amqp-suite.sh runs github.com/Azure/go-amqp v1.7.0's own integration
# tests against a freshly built epitaph.
#
#   bash scripts/go-amqp-suite.sh            # from the module root
#   GO_AMQP_RUN='TestIntegration' bash scripts/go-amqp-suite.sh   # narrower -run
#
# Exits with the test's status. The broker is stopped by pid, never by name.
set -euo pipefail

cd "$(dirname "$0")/.."
GO_AMQP_VERSION=v1.7.0
RUN_REGEX="${GO_AMQP_RUN:-TestIntegration|TestReceiverModeFirst|TestSenderExactlyOnce|TestDrainingLink|TestSenderNullValue|TestMultipleSessionsOpenClose|TestConcurrentSessionsOpenClose|TestReceivingLotsOfSettledMessages|TestMultipleSendersSharedSession}"
READY_TIMEOUT=30 # seconds to wait for "amqp listening on"

work="$(mktemp -d "${TMPDIR:-/tmp}/go-amqp-suite.XXXXXX")"
broker_pid=""
cleanup() {
	if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
		kill -TERM "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "--- go mod download github.com/Azure/go-amqp@${GO_AMQP_VERSION}"
go mod download "github.com/Azure/go-amqp@${GO_AMQP_VERSION}"
src="$(go env GOMODCACHE)/github.com/!azure/go-amqp@${GO_AMQP_VERSION}"
[[ -d "$src" ]] || { echo "go-amqp source not found at $src" >&2; exit 1; }

echo "--- build ./cmd/epitaph"
go build -o "$work/epitaph" ./cmd/epitaph

echo "--- start epitaph"
# Port 0: the kernel picks a free port and epitaph prints it, so there is no
# probe-then-bind race.
mkfifo "$work/stdout"
"$work/epitaph" --listen 127.0.0.1:0 --auto-create-queues --in-memory --http-listen "" \
	>"$work/stdout" 2>"$work/broker.log" </dev/null &
broker_pid=$!
exec 3<"$work/stdout"
addr=""
if IFS= read -r -t "$READY_TIMEOUT" line <&3; then
	addr="${line#amqp listening on }"
	[[ "$addr" != "$line" ]] || addr=""
fi
if [[ -z "$addr" ]]; then
	echo "epitaph did not print 'amqp listening on' within ${READY_TIMEOUT}s; log:" >&2
	cat "$work/broker.log" >&2
	exit 1
fi
# Keep draining stdout so the broker never blocks on a full pipe.
cat <&3 >/dev/null &
exec 3<&-
echo "epitaph (pid $broker_pid) listening on $addr"

echo "--- copy go-amqp ${GO_AMQP_VERSION} sources"
cp -r "$src" "$work/go-amqp"
chmod -R u+w "$work/go-amqp"

echo "--- go test (go-amqp integration suite) against amqp://$addr"
status=0
(
	cd "$work/go-amqp"
	AMQP_BROKER_ADDR="amqp://$addr" go test -count=1 -timeout 300s -run "$RUN_REGEX" -v .
) || status=$?

echo "--- stop epitaph (pid $broker_pid)"
kill -TERM "$broker_pid" 2>/dev/null || true
broker_status=0
wait "$broker_pid" || broker_status=$?
broker_pid=""
if [[ $status -ne 0 || $broker_status -ne 0 ]]; then
	echo "--- epitaph log (exit $broker_status)"
	tail -n 200 "$work/broker.log"
fi
echo "go-amqp suite exit status: $status"
exit "$status"
