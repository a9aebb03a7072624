#!/usr/bin/env bash
# README command 2: set everything up, then run all tests (unit, golden vectors, conformance
# against the official RocketMQ started from Maven Central jars). .ci/run runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
bash scripts/setup.sh
echo "==> tests"
T1=$(date +%s)
set +e
.venv/bin/python -m pytest -ra -p no:cacheprovider --durations=15 "$@"
rc=$?
set -e
echo "<== tests: $(( $(date +%s) - T1 )) s; total: $(( $(date +%s) - T0 )) s"
# No JVM of ours may outlive the run.
if pgrep -f "$PWD/.cache/" >/dev/null; then
  echo "JVMs left running after the tests:" >&2; pgrep -af "$PWD/.cache/" >&2; rc=1
fi
[ $rc -eq 5 ] && { echo "pytest collected no tests" >&2; exit 1; }
exit $rc
