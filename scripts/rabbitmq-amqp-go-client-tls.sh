#!/usr/bin/env bash
# rabbitmq-amqp-go-client-tls.sh runs the TLS specs of the official RabbitMQ
# AMQP 1.0 Go client (github.com/rabbitmq/rabbitmq-amqp-go-client, package
# pkg/rabbitmqamqp) against a freshly built epitaph set up as that client's
# CI sets up RabbitMQ: its certificates (.ci/certs), its definitions
# (.ci/ubuntu/definitions.json: the user "O=client,CN=localhost" and the
# vhost "tls"), verify_peer without fail_if_no_peer_cert, and amqps on
# localhost:5671, the port the specs dial.
#
#   bash scripts/rabbitmq-amqp-go-client-tls.sh /path/to/rabbitmq-amqp-go-client
#   CLIENT_FOCUS='TLS' bash scripts/rabbitmq-amqp-go-client-tls.sh DIR   # ginkgo focus
#
# It fetches nothing: DIR is a checkout made beforehand, and go test uses
# the module cache (or GOPROXY) for the client's dependencies. Port 5671 on
# 127.0.0.1 must be free. Exits with the test's status. The broker is
# stopped by pid, never by name.
set -euo pipefail

client="${1:?usage: $0 /path/to/rabbitmq-amqp-go-client checkout}"
client="$(cd "$client" && pwd)"
[[ -f "$client/pkg/rabbitmqamqp/amqp_connection_test.go" ]] || {
	echo "$client does not look like a rabbitmq-amqp-go-client checkout" >&2
	exit 1
}
cd "$(dirname "$0")/.."
FOCUS="${CLIENT_FOCUS:-TLS}"
READY_TIMEOUT=30 # seconds to wait for the listening lines

source scripts/lib-epitaph.sh
trap epitaph_cleanup EXIT
work="$(mktemp -d "${TMPDIR:-/tmp}/rmq-client-tls.XXXXXX")"
epitaph_work="$work"

epitaph_build "$work"
certs="$client/.ci/certs"
echo "--- start epitaph (amqps on 127.0.0.1:5671, certificates from $certs)"
epitaph_start "amqps listening on " --listen 127.0.0.1:0 --in-memory --http-listen "" \
	--definitions "$client/.ci/ubuntu/definitions.json" \
	--tls-listen 127.0.0.1:5671 \
	--tls-cert-file "$certs/server_localhost_certificate.pem" \
	--tls-key-file "$certs/server_localhost_key.pem" \
	--tls-ca-file "$certs/ca_certificate.pem" --tls-verify-peer

echo "--- go test (focus: $FOCUS) in $client/pkg/rabbitmqamqp"
status=0
(
	cd "$client/pkg/rabbitmqamqp"
	go test -count=1 -v -timeout 300s -run TestPkg . -ginkgo.focus "$FOCUS" -ginkgo.v
) || status=$?

epitaph_stop "$status"
echo "rabbitmq-amqp-go-client TLS specs exit status: $status"
exit "$status"
