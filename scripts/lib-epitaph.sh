# lib-epitaph.sh is sourced by the scripts that run a client's own test
# suite against a freshly built epitaph: it builds the broker, starts it,
# waits for a listening line, and stops it by pid (never by name).
#
#   source scripts/lib-epitaph.sh
#   epitaph_build WORKDIR
#   epitaph_start "amqp listening on " ARGS...   # sets epitaph_addr and broker_pid
#   ...
#   epitaph_stop STATUS                           # prints the log's tail when anything failed
#
# The caller's EXIT trap calls epitaph_cleanup. READY_TIMEOUT (seconds, default
# 30) bounds the wait for the listening line.

broker_pid=""
epitaph_work=""
epitaph_addr=""

epitaph_build() {
	epitaph_work="$1"
	echo "--- build ./cmd/epitaph"
	go build -o "$epitaph_work/epitaph" ./cmd/epitaph
}

# epitaph_start PREFIX ARGS...: starts the broker with ARGS and waits for the
# standard-output line that starts with PREFIX; epitaph_addr is the rest of
# that line. Port 0 in ARGS lets the kernel pick a free port, which epitaph
# prints, so there is no probe-then-bind race.
epitaph_start() {
	local prefix="$1" line
	shift
	mkfifo "$epitaph_work/stdout"
	"$epitaph_work/epitaph" "$@" >"$epitaph_work/stdout" 2>"$epitaph_work/broker.log" </dev/null &
	broker_pid=$!
	exec 3<"$epitaph_work/stdout"
	epitaph_addr=""
	while IFS= read -r -t "${READY_TIMEOUT:-30}" line <&3; do
		echo "epitaph: $line"
		if [[ "$line" == "$prefix"* ]]; then
			epitaph_addr="${line#"$prefix"}"
			break
		fi
	done
	if [[ -z "$epitaph_addr" ]]; then
		echo "epitaph did not print '$prefix' within ${READY_TIMEOUT:-30}s; log:" >&2
		cat "$epitaph_work/broker.log" >&2
		exit 1
	fi
	cat <&3 >/dev/null & # keep draining stdout so the broker never blocks on a full pipe
	exec 3<&-
	echo "epitaph (pid $broker_pid) listening on $epitaph_addr"
}

# epitaph_stop STATUS: stops the broker; when STATUS (the suite's) or the
# broker's own exit status is not 0, prints the end of its log.
epitaph_stop() {
	local status="$1" broker_status=0
	echo "--- stop epitaph (pid $broker_pid)"
	kill -TERM "$broker_pid" 2>/dev/null || true
	wait "$broker_pid" || broker_status=$?
	broker_pid=""
	if [[ $status -ne 0 || $broker_status -ne 0 ]]; then
		echo "--- epitaph log (exit $broker_status)"
		tail -n 200 "$epitaph_work/broker.log"
	fi
}

epitaph_cleanup() {
	if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
		kill -TERM "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	if [[ -n "$epitaph_work" ]]; then
		chmod -R u+w "$epitaph_work" 2>/dev/null || true
		rm -rf "$epitaph_work"
	fi
}
