#!/usr/bin/env bash
# A Docker engine for the test run (used by scripts/setup.sh and scripts/test.sh).
#
#   docker-engine.sh up     make an engine reachable: use one that answers; else install Debian's
#                           docker.io (root or passwordless sudo) and start dockerd for this run,
#                           without touching the host's networking (no bridge, no iptables, no
#                           forwarding or masquerading: containers use network_mode=host on loopback).
#                           Exit 0 when an engine answers; else print why and exit 3.
#   docker-engine.sh down   stop the dockerd a run of ours started, once no other run of ours uses it.
#                           An engine we did not start is never touched.
#
# Runs of ours may overlap on one machine and share one daemon. Each run holds a shared flock on
# $STATE/users.lock on file descriptor 8 for its whole length (scripts/test.sh opens it and passes it
# down); `down` stops the daemon only when it can turn that lock exclusive, i.e. it is the last user.
# The daemon's pid file in $STATE marks it as started by us.
set -euo pipefail
STATE=${RMQWIRE_DOCKER_STATE:-/tmp/rmqwire-dockerd}
PIDFILE=$STATE/dockerd.pid
LOG=$STATE/dockerd.log
START_TIMEOUT=60
STOP_TIMEOUT=60

SUDO=()
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=(sudo -n); fi
may_root() { [ "$(id -u)" = 0 ] || [ ${#SUDO[@]} -gt 0 ]; }
as_root() { ${SUDO[@]+"${SUDO[@]}"} "$@"; }
sbin() { PATH="$PATH:/usr/sbin:/sbin" command -v "$1"; }

engine_answers() { command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; }

our_pid() {   # the pid of a live dockerd that a run of ours started, else nothing
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qE '^([^ ]*/)?dockerd ' \
    && echo "$pid"
}

install_engine() {
  local need=()
  sbin dockerd >/dev/null || need+=(docker.io)
  # debootstrap builds the RocketMQ image when no registry serves apache/rocketmq (tools/reference/image.py).
  sbin debootstrap >/dev/null || need+=(debootstrap)
  [ ${#need[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null; then echo "cannot install ${need[*]}: no apt-get" >&2; return 1; fi
  if ! may_root; then echo "cannot install ${need[*]}: not root and no passwordless sudo" >&2; return 1; fi
  echo "installing ${need[*]} (Debian packages)"
  # The package's maintainer scripts would start the system's docker service with its default
  # networking (bridge, iptables); a policy-rc.d that refuses service starts prevents that.
  local policy=/usr/sbin/policy-rc.d added=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# rmqwire setup: no service starts while docker.io installs\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"; added=1
  fi
  local rc=0
  { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$STATE/apt.log" 2>&1 || rc=$?
  [ $added = 1 ] && as_root rm -f "$policy"
  [ $rc = 0 ] || tail -n 20 "$STATE/apt.log" >&2
  return $rc
}

start_engine() {
  mkdir -p "$STATE"
  local dockerd group=()
  dockerd=$(sbin dockerd)
  # Through sudo the socket must be usable by the user who runs the tests.
  [ ${#SUDO[@]} -gt 0 ] && group=(--group "$(id -gn)")
  echo "starting dockerd for this run (no bridge, no iptables; log $LOG)"
  # setsid + closed descriptors: the daemon must not hold the run's lock (fd 8) or its output pipes.
  as_root setsid "$dockerd" --bridge=none --iptables=false --ip-forward=false --ip-masq=false \
    --pidfile "$PIDFILE" ${group[@]+"${group[@]}"} </dev/null >"$LOG" 2>&1 7>&- 8>&- 9>&- &
  local deadline=$(( $(date +%s) + START_TIMEOUT ))
  until engine_answers; do
    if [ "$(date +%s)" -ge $deadline ] || ! kill -0 $! 2>/dev/null; then
      echo "dockerd did not come up within ${START_TIMEOUT} s:" >&2; tail -n 20 "$LOG" >&2 || true
      stop_pid "$(cat "$PIDFILE" 2>/dev/null || true)"
      return 1
    fi
    sleep 0.5
  done
  echo "dockerd $(cat "$PIDFILE") answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
}

stop_pid() {   # SIGTERM (dockerd stops its containers and its containerd), SIGKILL after a timeout
  local pid=$1
  [ -n "$pid" ] || return 0
  as_root kill -TERM "$pid" 2>/dev/null || return 0
  local deadline=$(( $(date +%s) + STOP_TIMEOUT ))
  while [ -d "/proc/$pid" ] && [ "$(date +%s)" -lt $deadline ]; do sleep 0.5; done
  if [ -d "/proc/$pid" ]; then
    echo "dockerd $pid still running after ${STOP_TIMEOUT} s: SIGKILL" >&2
    as_root kill -KILL "$pid" 2>/dev/null || true
    # Its own containerd (state under /var/run/docker) would outlive a killed dockerd.
    local cpid
    for cpid in $(pgrep -f 'containerd --config /var/run/docker/containerd/containerd.toml' || true); do
      as_root kill -KILL "$cpid" 2>/dev/null || true
    done
  fi
  as_root rm -f "$PIDFILE"
}

case "${1:-}" in
  up)
    if engine_answers; then
      echo "Docker engine answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null)); using it"
      exit 0
    fi
    mkdir -p "$STATE"
    # One starter at a time: a second run waits, then finds the first one's daemon answering.
    exec 7>>"$STATE/start.lock"
    flock -w 300 7
    if engine_answers; then echo "Docker engine answers (started by another run)"; exit 0; fi
    if [ -S /var/run/docker.sock ] && ! [ -w /var/run/docker.sock ] && ! may_root; then
      echo "no Docker engine usable: /var/run/docker.sock is not writable for $(id -un)" >&2; exit 3
    fi
    install_engine || { echo "no Docker engine: docker.io could not be installed" >&2; exit 3; }
    if ! may_root; then echo "no Docker engine: dockerd needs root and sudo -n is not allowed" >&2; exit 3; fi
    if pgrep -x dockerd >/dev/null; then
      echo "no Docker engine: a dockerd runs but does not answer (not started by us; left alone)" >&2; exit 3
    fi
    start_engine || { echo "no Docker engine: dockerd could not be started" >&2; exit 3; }
    ;;
  down)
    pid=$(our_pid) || exit 0
    if ! { true >&8; } 2>/dev/null; then
      echo "docker-engine.sh down: fd 8 (the run's users.lock) is not open; leaving dockerd $pid running" >&2
      exit 0
    fi
    if ! flock -xn 8; then
      echo "dockerd $pid is still used by another test run; it stops when the last one ends"
      exit 0
    fi
    echo "stopping dockerd $pid (started for this run)"
    stop_pid "$pid"
    ;;
  *)
    echo "usage: $0 up|down" >&2; exit 2 ;;
esac
