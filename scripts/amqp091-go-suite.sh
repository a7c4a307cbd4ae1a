#!/usr/bin/env bash
# amqp091-go-suite.sh runs github.com/rabbitmq/amqp091-go's own tests (the
# version in go.mod) with its integration build tag against a freshly built
# epitaph, over AMQP 0-9-1 on epitaph's AMQP port.
#
#   bash scripts/amqp091-go-suite.sh                         # from the module root
#   AMQP091_RUN='TestIntegration' bash scripts/amqp091-go-suite.sh   # narrower -run
#   AMQP091_URL=amqp://guest:guest@127.0.0.1:5673/ bash scripts/amqp091-go-suite.sh
#       # against a running broker instead (RabbitMQ, to check the runner);
#       # its HTTP API must then be on localhost:15672 too, see below
#
# The suite is the client's `make tests` (go test -tags integration, here
# without -race): its unit tests and its integration tests, which dial
# AMQP_URL. The connection-recovery tests find and close their connection
# through the management HTTP API, at a fixed http://localhost:15672 with
# guest/guest (GET /api/connections/, DELETE /api/connections/NAME, by the
# client-provided connection_name), so epitaph is started with its HTTP API
# on 127.0.0.1:15672: that port must be free.
#
# Left out (SKIP_REGEX), each for a RabbitMQ-only feature:
#   TestConnection_Close_WhenMemoryAlarmIsActive
#       raises a memory alarm with `rabbitmqctl set_vm_memory_high_watermark`
#       (RabbitMQ's CLI, found through RABBITMQ_RABBITMQCTL_PATH); without it
#       the test skips itself. epitaph's alarms are tested in e2e.
# Left out because epitaph refuses the tx class (540 NOT_IMPLEMENTED; see
# the README's AMQP 0-9-1 section for why):
#   TestIntegrationTxCommit, TestIntegrationTxRollback
# Not left out, but worth knowing: TestRabbitMQQueueTTLGet and
# TestRabbitMQQueueNackMultipleRequeue do their work only when the server's
# `product` property is "RabbitMQ" (else they pass having done nothing).
#
# Exits with the test's status. The broker is stopped by pid, never by name.
set -euo pipefail

cd "$(dirname "$0")/.."
AMQP091_VERSION="$(go list -m -f '{{.Version}}' github.com/rabbitmq/amqp091-go)"
RUN_REGEX="${AMQP091_RUN:-.}"
SKIP_REGEX='^(TestConnection_Close_WhenMemoryAlarmIsActive|TestIntegrationTxCommit|TestIntegrationTxRollback)$'
READY_TIMEOUT=30 # seconds to wait for "amqp listening on"

source scripts/lib-epitaph.sh
trap epitaph_cleanup EXIT
work="$(mktemp -d "${TMPDIR:-/tmp}/amqp091-go-suite.XXXXXX")"
epitaph_work="$work"

echo "--- go mod download github.com/rabbitmq/amqp091-go@${AMQP091_VERSION}"
go mod download "github.com/rabbitmq/amqp091-go@${AMQP091_VERSION}"
src="$(go env GOMODCACHE)/github.com/rabbitmq/amqp091-go@${AMQP091_VERSION}"
[[ -d "$src" ]] || { echo "amqp091-go source not found at $src" >&2; exit 1; }

if [[ -n "${AMQP091_URL:-}" ]]; then
	url="$AMQP091_URL"
	echo "--- using the broker at $url (AMQP091_URL); nothing built or started"
else
	epitaph_build "$work"
	echo "--- start epitaph"
	epitaph_start "amqp listening on " --listen 127.0.0.1:0 --in-memory --http-listen 127.0.0.1:15672
	url="amqp://guest:guest@$epitaph_addr/"
fi

echo "--- copy amqp091-go ${AMQP091_VERSION} sources"
cp -r "$src" "$work/amqp091-go"
chmod -R u+w "$work/amqp091-go"

echo "--- go test -tags integration (amqp091-go's suite) against $url, skipping $SKIP_REGEX"
status=0
(
	cd "$work/amqp091-go"
	AMQP_URL="$url" go test -count=1 -tags integration -timeout 600s -run "$RUN_REGEX" -skip "$SKIP_REGEX" -v .
) || status=$?

if [[ -z "${AMQP091_URL:-}" ]]; then
	epitaph_stop "$status"
fi
echo "amqp091-go suite exit status: $status"
exit "$status"
