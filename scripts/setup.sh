#!/usr/bin/env bash
# Set up everything rmqwire needs on a fresh machine: system packages (JDK 17, Maven, Node, Prometheus),
# the Python venv, the official RocketMQ jars from Maven Central, and the peer clients.
# With RMQWIRE_WITH_DOCKER=1 (scripts/test.sh sets it) also a Docker engine for the run and the
# RocketMQ image for the container backend (scripts/docker-engine.sh, tools/reference/image.py);
# where Docker cannot be had it says why and goes on (the docker tests then skip).
# Idempotent: a second run reuses what is there. Prints the time each stage took.
# --main-only (scripts/run.sh): only what the main job needs, the venv with the package.
set -euo pipefail
MAIN_ONLY=0
[ "${1:-}" = "--main-only" ] && MAIN_ONLY=1
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}

stage() { STAGE_NAME=$1; STAGE_T0=$(date +%s); echo "==> $1"; }
done_stage() { echo "<== $STAGE_NAME: $(( $(date +%s) - STAGE_T0 )) s"; }

stage "system packages"
need=()
command -v "$PY" >/dev/null || need+=(python3)
# Debian/Ubuntu ship venv/ensurepip separately; without it `python3 -m venv` fails.
command -v "$PY" >/dev/null && "$PY" -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
if [ $MAIN_ONLY = 0 ]; then
[ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/javac ] || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need+=(maven)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# test.sh checks with pgrep that no JVM outlives the tests; without procps that check is silently void.
command -v pgrep >/dev/null || need+=(procps)
# The metrics tests start a real Prometheus (and promtool) on a free loopback port of their own.
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || need+=(prometheus)
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=()
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=(sudo -n); fi
  if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ ${#SUDO[@]} -gt 0 ]; }; then
    ${SUDO[@]+"${SUDO[@]}"} apt-get update -qq
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  else
    echo "missing system packages: ${need[*]} (install them, e.g. with apt-get)" >&2
    exit 1
  fi
fi
done_stage

stage "python venv"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
if [ $MAIN_ONLY = 1 ]; then
  # The install is editable: only a changed pyproject.toml needs it again.
  stamp=$(sha256sum pyproject.toml | cut -d' ' -f1)
  if [ "$(cat .venv/.rmqwire-installed 2>/dev/null)" != "$stamp" ]; then
    # An old distribution pip may not build editable pyproject installs: upgrade it only then.
    .venv/bin/python -m pip install -q -e . 2>/dev/null \
      || { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e .; }
    echo "$stamp" > .venv/.rmqwire-installed
  fi
  done_stage
  exit 0
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
sha256sum pyproject.toml | cut -d' ' -f1 > .venv/.rmqwire-installed
done_stage

stage "official RocketMQ jars (Maven Central)"
.venv/bin/python -c "from tools.reference.jars import ensure_jars; print(ensure_jars('5.3.3'))"
done_stage

if [ -f tools/peers/node/package.json ]; then
  stage "node peer (ali-ons)"
  (cd tools/peers/node && if [ -d node_modules ]; then echo "node_modules present"; else npm ci --no-audit --no-fund --loglevel=error; fi)
  done_stage
fi

if [ -f tools/peers/cpp_peer.py ]; then
  stage "C++ peer (PyPI rocketmq 0.4.4)"
  .venv/bin/python -c "from tools.peers.cpp_peer import ensure_cpp_venv; print(ensure_cpp_venv())"
  done_stage
fi

if [ "${RMQWIRE_WITH_DOCKER:-0}" = 1 ]; then
  stage "docker engine"
  docker_ok=1
  bash scripts/docker-engine.sh up || { docker_ok=0; echo "no Docker engine for this run: the docker tests will skip"; }
  done_stage
  if [ $docker_ok = 1 ]; then
    stage "RocketMQ image (container backend)"
    .venv/bin/python -m tools.reference.image "${RMQWIRE_ROCKETMQ_VERSION:-5.3.3}" \
      || echo "no RocketMQ image: the docker tests will fail under CI=true, skip otherwise"
    done_stage
  fi
fi
