# What the refusal benchmarks share (sourced by ci/bench-refusals.sh and
# ci/bench-refusal-instructions.sh): their tools, the build they measure, a server with every
# digitize slot held by a test hook, the request they flood it with, and its metrics. The caller
# sets `work` (a scratch directory) first; each function says which globals it sets.

# Installs with apt-get the Debian packages named whose command is missing (nginx's is looked
# for in /usr/sbin too); exits 2 if it cannot.
install_missing() {
  local need=() p
  for p in "$@"; do
    command -v "$p" >/dev/null || [ -x "/usr/sbin/$p" ] || need+=("$p")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  echo "installing ${need[*]} (apt-get)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; } ||
    { echo "needs ${need[*]} (apt-get install -y ${need[*]})" >&2; exit 2; }
}

# The `plimsoll` to measure: PLIMSOLL_BIN, or this tree's release build.
plimsoll_bin() {
  if [ -n "${PLIMSOLL_BIN:-}" ]; then
    echo "$PLIMSOLL_BIN"
  else
    cargo build --release --quiet -p plimsoll
    echo "$(target_dir)/release/plimsoll"
  fi
}

# Where cargo builds: CARGO_TARGET_DIR or a configured target-dir moves it from target/.
target_dir() {
  cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

# A loopback port free right now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Starts `COMMAND… serve` (the binary, or a profiler running it) with test hooks on, its log and
# job directories in $work and a digitize timeout (B1) past HOLD_S, and waits until it answers.
# Sets server_pid and url.
start_server() {
  local hold_s=$1 port
  shift
  port=$(free_port)
  PLIMSOLL_TEST_HOOKS=1 PLIMSOLL_TEMP_DIR="$work/jobs" PLIMSOLL_LOG_FILE="$work/server.log" \
    DIGITIZE_TIMEOUT_MS=$(((hold_s + 30) * 1000)) \
    "$@" serve --port "$port" 2>"$work/serve.err" &
  server_pid=$!
  url="http://127.0.0.1:$port"
  for _ in $(seq 300); do curl -fs "$url/healthz" >/dev/null && return; sleep 0.1; done
  echo "the server did not answer in 30 s: $(cat "$work/serve.err")" >&2
  exit 1
}

# A metric's value, by its name and labels as /metrics prints them.
metric() { curl -fs "$url/metrics" | awk -v m="$1" 'index($0, m) == 1 {print $2}'; }
# The refusals (T3) the server has counted.
refused() {
  curl -fs "$url/metrics" | awk '/^plimsoll_requests_total\{/ && /pool="digitize"/ && /outcome="overloaded"/ {print $2}'
}

# The request the floods send: a tiny PNG (refused before it is decoded), in $work/tiny.png, and
# wrk's script posting it, $work/post.lua.
write_request() {
  python3 - "$work/tiny.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
raw = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
  cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "image/png"
local f = io.open("$work/tiny.png", "rb"); wrk.body = f:read("*a"); f:close()
LUA
}

# Holds every digitize slot for HOLD_S seconds (the `hold` hook; the holders' clients hang up
# when killed) and waits until the pool reports them all busy. Sets workers, busy and holders.
hold_every_slot() {
  local hold_s=$1
  workers=$(metric 'plimsoll_workers_limit{pool="digitize"}')
  for _ in $(seq "$workers"); do
    curl -s -o /dev/null -X POST -H 'content-type: image/png' -H "x-plimsoll-hook: hold=decode:$((hold_s * 1000))" \
      --data-binary @"$work/tiny.png" "$url/v1/digitize" &
    holders="$holders $!"
  done
  for _ in $(seq 600); do
    busy=$(metric 'plimsoll_workers_busy{pool="digitize"}')
    [ "$busy" = "$workers" ] && return
    sleep 0.05
  done
}
