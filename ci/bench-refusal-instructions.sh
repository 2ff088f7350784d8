#!/usr/bin/env bash
# The user-space instructions the server executes per 503 refusal (T3), counted by callgrind:
# unlike a rate or a CPU time, the figure does not move with the machine's load, so a change of
# a few percent on the refusal path shows in one run. With every digitize slot held, wrk keeps
# refusals coming (8 connections) while callgrind counts; the counters are zeroed once the flood
# runs and dumped SECONDS later, and the server's own count of refusals in between divides them.
# Loopback only; bounded in time. The kernel's share (the socket calls) is not counted: see
# ci/bench-refusals.sh for the whole.
#
#   bash ci/bench-refusal-instructions.sh [SECONDS]
#
# Settings: PLIMSOLL_BIN=path counts that build of `plimsoll` instead of building this tree's
# (release); KEEP=FILE keeps callgrind's profile (callgrind_annotate --inclusive=yes FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-6}
# shellcheck source=ci/bench-server.sh
source ci/bench-server.sh
install_missing wrk valgrind
bin=$(plimsoll_bin)
work=$(mktemp -d)
server_pid=""
holders=""
flood_pid=""
trap 'kill $server_pid $holders $flood_pid 2>/dev/null || true; rm -rf "$work"' EXIT

hold_s=$((seconds + 60))
start_server "$hold_s" valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "$bin"
write_request
hold_every_slot "$hold_s"

wrk -t1 -c8 -d$((seconds + 6))s -s "$work/post.lua" "$url/v1/digitize" >"$work/wrk.txt" &
flood_pid=$!
sleep 3
callgrind_control -z "$server_pid" >/dev/null
before=$(refused)
sleep "$seconds"
after=$(refused)
callgrind_control -d "$server_pid" >/dev/null
wait "$flood_pid" || true
flood_pid=""
sleep 1
# The dump taken on request is the newest file beside the one written at exit.
profile=$(ls -t "$work"/callgrind.out* | head -1)
total=$(callgrind_annotate "$profile" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
refusals=$((${after:-0} - ${before:-0}))
echo "refusals counted: $refusals in ${seconds} s under callgrind"
if [ "$refusals" -le 0 ] || [ -z "$total" ]; then
  echo "nothing to divide: no refusal counted (is every slot held? $(tail -3 "$work/serve.err"))" >&2
  exit 1
fi
echo "user-space instructions per refusal: $((total / refusals))"
if [ -n "${KEEP:-}" ]; then cp "$profile" "$KEEP"; fi
