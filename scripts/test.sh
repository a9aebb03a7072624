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
finish() {
  local rc=$?
  trap - EXIT
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

PYTEST=(.venv/bin/python -m pytest -ra -p no:cacheprovider --durations=15)
echo "==> tests (reference backend: JVM)"
T1=$(date +%s)
set +e
RMQWIRE_REFERENCE_BACKEND=jvm "${PYTEST[@]}" "$@"
rc=$?
set -e
echo "<== tests (reference backend: JVM): $(( $(date +%s) - T1 )) s"
[ $rc -eq 5 ] && { echo "pytest collected no tests" >&2; rc=1; }

if [ $# -eq 0 ]; then
  if [ -n "$docker_why" ]; then
    echo "==> conformance against the container backend not run: $docker_why"
  else
    echo "==> conformance tests (reference backend: containers)"
    T2=$(date +%s)
    set +e
    RMQWIRE_REFERENCE_BACKEND=docker "${PYTEST[@]}" \
      tests/conformance/test_codec_remoting.py tests/conformance/test_peers.py
    rc2=$?
    set -e
    echo "<== conformance tests (reference backend: containers): $(( $(date +%s) - T2 )) s"
    [ $rc2 -ne 0 ] && rc=$rc2
  fi
fi
echo "<== total: $(( $(date +%s) - T0 )) s"

# No JVM of ours may outlive the run.
if pgrep -f "$PWD/.cache/" >/dev/null; then
  echo "JVMs left running after the tests:" >&2; pgrep -af "$PWD/.cache/" >&2; rc=1
fi
exit $rc
