#!/usr/bin/env bash
# README command 1: set up what the main job needs, then run it (rmqwire standalone).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --main-only
# No arguments, or only options: the main job, rmqwire standalone (NameServer + Broker).
if [ $# -eq 0 ] || [ "${1#-}" != "$1" ]; then set -- standalone "$@"; fi
exec .venv/bin/python -m rmqwire "$@"
