#!/usr/bin/env bash
# Benchmark of the 503 path (T3): with every digitize slot held, hammer POST /v1/digitize from a
# second process (wrk) and report refusals per second, latency percentiles, and the server's RSS
# before and after. Loopback only; bounded in time.
#
#   bash ci/bench-refusals.sh [DURATION_S] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10}
connections=${2:-32}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install -y wrk)" >&2; exit 2; }

cargo build --release --quiet -p plimsoll-conformance
bin=target/release/plimsoll
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
work=$(mktemp -d)
trap 'kill $server_pid $holders 2>/dev/null || true; rm -rf "$work"' EXIT

PLIMSOLL_TEST_HOOKS=1 PLIMSOLL_TEMP_DIR="$work/jobs" PLIMSOLL_LOG_FILE="$work/server.log" \
  "$bin" serve --port "$port" 2>"$work/serve.err" &
server_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 50); do curl -fs "$url/healthz" >/dev/null && break; sleep 0.1; done

rss() { awk '/VmRSS/ {print $2 / 1024 " MB"}' "/proc/$server_pid/status"; }
workers=$(curl -fs "$url/metrics" | awk -F' ' '/^plimsoll_workers_limit\{pool="digitize"\}/ {print $2}')

# A tiny PNG to send (the refusal happens before it is decoded).
python3 - "$work/tiny.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
raw = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY

# Hold every slot for longer than the run.
holders=""
for _ in $(seq "$workers"); do
  curl -s -o /dev/null -X POST -H 'content-type: image/png' -H "x-plimsoll-hook: hold=decode:$(( (duration + 20) * 1000 ))" \
    --data-binary @"$work/tiny.png" "$url/v1/digitize" &
  holders="$holders $!"
done
for _ in $(seq 100); do
  busy=$(curl -fs "$url/metrics" | awk '/^plimsoll_workers_busy\{pool="digitize"\}/ {print $2}')
  [ "$busy" = "$workers" ] && break
  sleep 0.05
done
echo "pool saturated: $busy/$workers busy; RSS before: $(rss)"

cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "image/png"
local f = io.open("$work/tiny.png", "rb"); wrk.body = f:read("*a"); f:close()
LUA
wrk -t2 -c"$connections" -d"${duration}s" --latency -s "$work/post.lua" "$url/v1/digitize" | tee "$work/wrk.txt"
echo "RSS after: $(rss)"
refused=$(curl -fs "$url/metrics" | awk '/^plimsoll_requests_total\{.*pool="digitize".*outcome="overloaded"|^plimsoll_requests_total\{.*outcome="overloaded".*pool="digitize"/ {print $2}')
echo "refusals counted by the server: $refused"
