#!/usr/bin/env bash
# Start the Python example service: ./run.sh [--port N] [--bind ADDR] [--relay-concurrency N]
# Settings come from the environment (see README.md). Installs nothing: run
#   python3 -m pip install -r requirements.txt
# once first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec "${PYTHON:-python3}" -m plimsoll_service "$@"
