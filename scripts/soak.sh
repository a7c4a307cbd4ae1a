#!/usr/bin/env bash
# soak.sh: a long load run for a developer machine (it is not run by CI).
# It runs e2e's TestLoadLedger with a longer duration, more connections, a population of idle connections and
# a bound on the RSS trend: the same ledger (nothing lost, unexpected,
# duplicated or out of order; every queue empty after the drain), goroutine
# and heap checks as the CI's 3-minute load run. Broker and clients run in one
# process on 127.0.0.1 only.
#
# Parameters (environment), with their defaults:
#   SOAK_DURATION=30m      publishing time (at most 1h; the test refuses more)
#   SOAK_RATE=5000         messages per second, all publishers together
#   SOAK_PUBLISHERS=500    publisher connections
#   SOAK_CONSUMERS=500     consumer connections
#   SOAK_IDLE=1000         idle connections held open through the run
#   SOAK_MAX_RSS_SLOPE=1   fail if RSS grows faster than this (MiB/min) over
#                          the last two thirds of the publishing
#   SOAK_MAX_RSS_MIB=1024  fail if the process's peak RSS passes this; the
#                          2,000 client connections share the process (with
#                          the defaults a 20 s run peaked at 487 MiB)
#
# Connections cost two file descriptors each here (both ends are in this
# process); the test refuses more than 5,000 connections in all.
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${SOAK_DURATION:-30m}"
export EPITAPH_LOAD_DURATION="$duration"
export EPITAPH_LOAD_RATE="${SOAK_RATE:-5000}"
export EPITAPH_LOAD_PUBLISHERS="${SOAK_PUBLISHERS:-500}"
export EPITAPH_LOAD_CONSUMERS="${SOAK_CONSUMERS:-500}"
export EPITAPH_LOAD_IDLE="${SOAK_IDLE:-1000}"
export EPITAPH_LOAD_MAX_RSS_SLOPE="${SOAK_MAX_RSS_SLOPE:-1}"
export EPITAPH_LOAD_MAX_RSS_MIB="${SOAK_MAX_RSS_MIB:-1024}"

# The whole run is bounded in time: the test's own limit is three times the
# duration plus two minutes; go test's -timeout is a little beyond that.
if [[ ! "$duration" =~ ^([0-9]+)(s|m|h)$ ]]; then
	echo "soak.sh: SOAK_DURATION must be a number of seconds, minutes or hours such as 30m, got '$duration'" >&2
	exit 2
fi
count="${BASH_REMATCH[1]}"
case "${BASH_REMATCH[2]}" in
s) seconds=$count ;;
m) seconds=$((count * 60)) ;;
h) seconds=$((count * 3600)) ;;
esac
timeout_s=$((3 * seconds + 300))

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "soak: $EPITAPH_LOAD_DURATION at $EPITAPH_LOAD_RATE msg/s, $EPITAPH_LOAD_PUBLISHERS publishers, $EPITAPH_LOAD_CONSUMERS consumers, $EPITAPH_LOAD_IDLE idle connections (test timeout ${timeout_s}s)"
go test -count=1 -timeout "${timeout_s}s" -run '^TestLoadLedger$' -v ./e2e | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|load: |Error|load_test'
