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

source scripts/lib-epitaph.sh
trap epitaph_cleanup EXIT
work="$(mktemp -d "${TMPDIR:-/tmp}/go-amqp-suite.XXXXXX")"
epitaph_work="$work"

echo "--- go mod download github.com/Azure/go-amqp@${GO_AMQP_VERSION}"
go mod download "github.com/Azure/go-amqp@${GO_AMQP_VERSION}"
src="$(go env GOMODCACHE)/github.com/!azure/go-amqp@${GO_AMQP_VERSION}"
[[ -d "$src" ]] || { echo "go-amqp source not found at $src" >&2; exit 1; }

epitaph_build "$work"
echo "--- start epitaph"
epitaph_start "amqp listening on " --listen 127.0.0.1:0 --auto-create-queues --in-memory --http-listen ""
addr="$epitaph_addr"

echo "--- copy go-amqp ${GO_AMQP_VERSION} sources"
cp -r "$src" "$work/go-amqp"
chmod -R u+w "$work/go-amqp"

echo "--- go test (go-amqp integration suite) against amqp://$addr"
status=0
(
	cd "$work/go-amqp"
	AMQP_BROKER_ADDR="amqp://$addr" go test -count=1 -timeout 300s -run "$RUN_REGEX" -v .
) || status=$?

epitaph_stop "$status"
echo "go-amqp suite exit status: $status"
exit "$status"
