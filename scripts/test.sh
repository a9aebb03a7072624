#!/usr/bin/env bash
# README command 2: set everything up, then run all tests (unit, golden vectors, conformance
# against the official RocketMQ started from Maven Central jars). .ci/run runs exactly this.
#
# Without arguments the conformance tests of the codec/remoting layers and the peers then run a
# second time against the container backend (the same release in Docker containers,
# RMQWIRE_REFERENCE_BACKEND=docker). Arguments are passed to the first pytest run only, and then
# the second run is left out. A Docker engine this run started is stopped at the end, however the
# run ends; so are containers and JVMs (checked).
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)

# This run uses the machine's Docker engine from now to the end: a shared lock, held on fd 8 by this
# shell, tells a run that ends meanwhile not to stop a daemon we share (scripts/docker-engine.sh).
export RMQWIRE_DOCKER_STATE=${RMQWIRE_DOCKER_STATE:-/tmp/rmqwire-dockerd}
mkdir -p "$RMQWIRE_DOCKER_STATE" && chmod 1777 "$RMQWIRE_DOCKER_STATE" 2>/dev/null || true
exec 8>>"$RMQWIRE_DOCKER_STATE/users.lock"
chmod 666 "$RMQWIRE_DOCKER_STATE/users.lock" 2>/dev/null || true
flock -w 600 -s 8
STREAMS=
finish() {
  local rc=$?
  trap - EXIT
  if [ -n "$STREAMS" ]; then  # interrupted: stop both pytest streams (their JVMs die with them)
    pkill -TERM -P "$(echo $STREAMS | tr ' ' ,)" 2>/dev/null || true
    wait 2>/dev/null || true
  fi
  # Containers whose pytest died without stop() (SIGKILL, SIGTERM): removed, and the run fails.
  if [ -x .venv/bin/python ] && ! .venv/bin/python -m tools.reference.docker_cluster leftovers; then
    [ $rc -eq 0 ] && rc=1
  fi
  bash scripts/docker-engine.sh down || true
  exit $rc
}
trap finish EXIT
trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM

RMQWIRE_WITH_DOCKER=1 bash scripts/setup.sh

# Docker is expected to work (and its absence fails under CI=true) when an engine answers now.
docker_why=$(.venv/bin/python -c 'from tools.reference.docker_cluster import docker_unavailable_reason as r; print(r() or "")') \
  || docker_why="no Docker engine (could not ask: tools.reference.docker_cluster failed to import)"
if [ -z "$docker_why" ]; then export RMQWIRE_DOCKER_EXPECTED=1; else unset RMQWIRE_DOCKER_EXPECTED; fi

PYTEST=(.venv/bin/python -u -m pytest -ra -p no:cacheprovider --durations=15)

# Without arguments the suite runs as two pytest processes at once, each with its own reference
# clusters: the conformance tests mostly wait on JVMs, timers and the network, so two streams
# fill the machine's two cores. Stream B then runs the container pass. Modules not named in B
# run in A. Each stream's lines are prefixed with its letter.
STREAM_B=(test_rmqadmin test_exporter test_producer test_broker_admin test_native_metrics
          test_acl_brokers test_tls_listeners test_broker_acl test_prometheus_harness
          test_typed_processor test_golden_vectors)
DOCKER_TESTS=(tests/conformance/test_codec_remoting.py tests/conformance/test_peers.py)

jvm_pass() {  # the tests against the official RocketMQ run as JVM processes
  RMQWIRE_REFERENCE_BACKEND=jvm "${PYTEST[@]}" "$@"
}

docker_pass() {
  if [ -n "$docker_why" ]; then
    echo "==> conformance against the container backend not run: $docker_why"
    return 0
  fi
  echo "==> conformance tests (reference backend: containers)"
  local t=$(date +%s) rc=0
  RMQWIRE_REFERENCE_BACKEND=docker "${PYTEST[@]}" "${DOCKER_TESTS[@]}" || rc=$?
  echo "<== conformance tests (reference backend: containers): $(( $(date +%s) - t )) s"
  return $rc
}

stream() {  # stream NAME CMD...: run CMD with its output prefixed; its exit status in $STATE/NAME.rc
  local name=$1; shift
  local rc=0
  "$@" > >(sed -u "s/^/[$name] /") 2>&1 || rc=$?
  echo $rc > "$STATE/$name.rc"
}

stream_a() {
  local ignore=() m
  for m in "${STREAM_B[@]}"; do ignore+=(--ignore "tests/conformance/$m.py"); done
  echo "==> stream A: tests (reference backend: JVM), all but stream B's modules"
  local t=$(date +%s) rc=0
  jvm_pass tests "${ignore[@]}" || rc=$?
  echo "<== stream A: $(( $(date +%s) - t )) s"
  [ $rc -eq 5 ] && { echo "pytest collected no tests" >&2; rc=1; }
  return $rc
}

stream_b() {
  local mods=() m
  for m in "${STREAM_B[@]}"; do mods+=("tests/conformance/$m.py"); done
  echo "==> stream B: tests (reference backend: JVM): ${STREAM_B[*]}"
  local t=$(date +%s) rc=0 rc2=0
  jvm_pass "${mods[@]}" || rc=$?
  echo "<== stream B (JVM): $(( $(date +%s) - t )) s"
  docker_pass || rc2=$?
  [ $rc -eq 0 ] && rc=$rc2
  return $rc
}

T1=$(date +%s)
if [ $# -gt 0 ]; then
  echo "==> tests (reference backend: JVM): $*"
  set +e
  jvm_pass "$@"
  rc=$?
  set -e
  [ $rc -eq 5 ] && { echo "pytest collected no tests" >&2; rc=1; }
else
  STATE=$(mktemp -d)
  stream A stream_a & PID_A=$!
  stream B stream_b & PID_B=$!
  STREAMS="$PID_A $PID_B"
  wait $PID_A $PID_B || true
  STREAMS=
  rc=0
  for s in A B; do
    r=$(cat "$STATE/$s.rc" 2>/dev/null || echo 1)
    echo "stream $s exit status: $r"
    [ "$r" -ne 0 ] && rc=$r
  done
  rm -rf "$STATE"
fi
echo "<== tests: $(( $(date +%s) - T1 )) s"
echo "<== total: $(( $(date +%s) - T0 )) s"

# No JVM of ours may outlive the run.
if pgrep -f "$PWD/.cache/" >/dev/null; then
  echo "JVMs left running after the tests:" >&2; pgrep -af "$PWD/.cache/" >&2; rc=1
fi
exit $rc
