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
# Left out of the main run: the entries of LEFT_OUT below, each under its
# reason. LEFT_OUT_TESTS is how many of the suite's tests they match (go
# test -list, on the compiled suite): a run where they match another number
# fails, so that an entry never hides a test it was not written for, nor
# stays after its test is gone.
#
# Run apart, with their server check widened: TestIntegrationRecoverNotImplemented,
# TestRabbitMQQueueTTLGet and TestRabbitMQQueueNackMultipleRequeue do their
# work only when the server's `product` property is "RabbitMQ", and they
# close their connection only inside that check (TestIntegrationRecoverNotImplemented
# has its `defer c.Close()` there; integrationRabbitMQ, which the other two
# call, returns nil without closing the connection it opened). Against any
# other broker each leaves one client connection open (a reader and a
# heartbeater goroutine), which the package's goleak check at exit
# (goleak.VerifyTestMain) reports, failing the whole package; against
# RabbitMQ they close it. So the main run leaves them out, and a second run
# compiles a copy of the suite whose two product checks accept any
# non-empty product (the edit must match exactly PRODUCT_CHECKS lines) and
# runs just these three, which must all pass: basic.recover(requeue=false)
# is 540, a message past x-message-ttl is not got, and basic.nack with
# multiple and requeue returns both messages in order.
#
# Exits with the test's status. The broker is stopped by pid, never by name.
set -euo pipefail

cd "$(dirname "$0")/.."
AMQP091_VERSION="$(go list -m -f '{{.Version}}' github.com/rabbitmq/amqp091-go)"
RUN_REGEX="${AMQP091_RUN:-.}"
# LEFT_OUT: the tests not run by the main run, one name per entry, each
# under the reason it is left out; remove an entry when what it needs lands.
LEFT_OUT=(
	# Raises a memory alarm with `rabbitmqctl set_vm_memory_high_watermark`
	# (RabbitMQ's CLI, found through RABBITMQ_RABBITMQCTL_PATH); without it
	# the test skips itself. epitaph's alarms are tested in e2e.
	TestConnection_Close_WhenMemoryAlarmIsActive
	# Gated on product "RabbitMQ", leaving a connection open elsewhere
	# (see above): run apart, in the second run.
	TestIntegrationRecoverNotImplemented
	TestRabbitMQQueueTTLGet
	TestRabbitMQQueueNackMultipleRequeue
)
LEFT_OUT_TESTS=4
# PRODUCT_GATED: the left-out tests the second run runs with the product
# check widened; PRODUCT_CHECKS: the lines of integration_test.go that check
# for product "RabbitMQ".
PRODUCT_GATED=(TestIntegrationRecoverNotImplemented TestRabbitMQQueueTTLGet TestRabbitMQQueueNackMultipleRequeue)
PRODUCT_CHECKS=2
names_regex() { local IFS='|'; echo "^($*)\$"; }
SKIP_REGEX="$(names_regex "${LEFT_OUT[@]}")"
GATED_REGEX="$(names_regex "${PRODUCT_GATED[@]}")"
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

suite="$work/amqp091-go"
echo "--- go test -c -tags integration (amqp091-go's suite)"
(cd "$suite" && go test -c -tags integration -o "$work/suite.test" .)
status=0
# -test.list prints the matching names (and, without AMQP_URL, a note that
# the default URL is used): count the names.
left_out="$(cd "$suite" && "$work/suite.test" -test.list "$SKIP_REGEX" | grep -cE '^(Test|Example|Benchmark|Fuzz)' || true)"
if [[ "$left_out" != "$LEFT_OUT_TESTS" ]]; then
	echo "the left-out entries match $left_out tests, LEFT_OUT_TESTS says $LEFT_OUT_TESTS: update LEFT_OUT" >&2
	status=1
fi

echo "--- amqp091-go's suite against $url, without ${#LEFT_OUT[@]} left-out tests"
(
	cd "$suite"
	AMQP_URL="$url" "$work/suite.test" -test.count=1 -test.timeout 600s -test.run "$RUN_REGEX" -test.skip "$SKIP_REGEX" -test.v
) || status=$?

if [[ -z "${AMQP091_RUN:-}" ]]; then
	echo "--- the product-gated tests, with the product check widened: ${PRODUCT_GATED[*]}"
	gated="$work/amqp091-go-gated"
	cp -r "$suite" "$gated"
	checks="$(grep -c '== "RabbitMQ"' "$gated/integration_test.go" || true)"
	sed -i 's/product\.(string) == "RabbitMQ"/product.(string) != ""/; s/server == "RabbitMQ"/server != ""/' "$gated/integration_test.go"
	left="$(grep -c '== "RabbitMQ"' "$gated/integration_test.go" || true)"
	if [[ "$checks" != "$PRODUCT_CHECKS" || "$left" != 0 ]]; then
		echo "integration_test.go has $checks product checks ($left left after the edit), PRODUCT_CHECKS says $PRODUCT_CHECKS: update the script" >&2
		status=1
	else
		(cd "$gated" && go test -c -tags integration -o "$work/gated.test" .)
		(
			cd "$gated"
			AMQP_URL="$url" "$work/gated.test" -test.count=1 -test.timeout 120s -test.run "$GATED_REGEX" -test.v
		) 2>&1 | tee "$work/gated.log" || status=1
		passed="$(grep -c '^--- PASS: ' "$work/gated.log" || true)"
		if [[ "$passed" != "${#PRODUCT_GATED[@]}" ]]; then
			echo "$passed of the ${#PRODUCT_GATED[@]} product-gated tests passed" >&2
			status=1
		fi
	fi
fi

if [[ -z "${AMQP091_URL:-}" ]]; then
	epitaph_stop "$status"
fi
echo "amqp091-go suite exit status: $status"
exit "$status"
