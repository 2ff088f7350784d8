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
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v valgrind >/dev/null || need+=(valgrind)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (apt-get)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; } ||
    { echo "needs ${need[*]} (apt-get install -y ${need[*]})" >&2; exit 2; }
fi
bin=${PLIMSOLL_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet -p plimsoll
  bin=target/release/plimsoll
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
work=$(mktemp -d)
server_pid=""
holders=""
flood_pid=""
trap 'kill $server_pid $holders $flood_pid 2>/dev/null || true; rm -rf "$work"' EXIT

hold_s=$((seconds + 60))
PLIMSOLL_TEST_HOOKS=1 PLIMSOLL_TEMP_DIR="$work/jobs" PLIMSOLL_LOG_FILE="$work/server.log" \
  DIGITIZE_TIMEOUT_MS=$(( (hold_s + 30) * 1000 )) \
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "$bin" serve --port "$port" \
  2>"$work/serve.err" &
server_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 300); do curl -fs "$url/healthz" >/dev/null && break; sleep 0.1; done
metric() { curl -fs "$url/metrics" | awk -v m="$1" 'index($0, m) == 1 {print $2}'; }
refused() {
  curl -fs "$url/metrics" | awk '/^plimsoll_requests_total\{/ && /pool="digitize"/ && /outcome="overloaded"/ {print $2}'
}
workers=$(metric 'plimsoll_workers_limit{pool="digitize"}')

# Any body will do: the refusal comes before it is decoded.
printf '\x89PNG\r\n\x1a\n%040d' 0 >"$work/tiny.png"
cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "image/png"
local f = io.open("$work/tiny.png", "rb"); wrk.body = f:read("*a"); f:close()
LUA
for _ in $(seq "$workers"); do
  curl -s -o /dev/null -X POST -H 'content-type: image/png' -H "x-plimsoll-hook: hold=decode:$((hold_s * 1000))" \
    --data-binary @"$work/tiny.png" "$url/v1/digitize" &
  holders="$holders $!"
done
for _ in $(seq 300); do
  [ "$(metric 'plimsoll_workers_busy{pool="digitize"}')" = "$workers" ] && break
  sleep 0.1
done

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
refusals=$((after - before))
echo "refusals counted: $refusals in ${seconds} s under callgrind"
echo "user-space instructions per refusal: $((total / refusals))"
if [ -n "${KEEP:-}" ]; then cp "$profile" "$KEEP"; fi
