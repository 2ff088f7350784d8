#!/usr/bin/env bash
# Benchmark of the 503 path (T3): with every digitize slot held, hammer POST /v1/digitize from a
# second process (wrk) and report refusals per second, latency percentiles, the server's RSS
# before, during and after the flood, and its log (one line per refusal). Loopback only; bounded
# in time.
#
#   bash ci/bench-refusals.sh [DURATION_S] [CONNECTIONS]
#   bash ci/bench-refusals.sh --refusals N [CONNECTIONS]
#
# With --refusals, a 3 s run measures the rate first, then the flood lasts long enough for about
# N refusals in all (--refusals 1000000: the one-million-refusal flood of docs/benchmarks.md).
#
# Then, side by side (unless NGINX=0 or --refusals): nginx doing the same work — the same 503
# problem+json body (copied from a real refusal, with nginx's own request id), the same headers
# and one JSON access-log line per request — flooded by the same wrk command, in turns with the
# server (SLICES slices each, default 4, of DURATION_S / SLICES whole seconds, so that the
# machine's drifting speed falls on both alike), and the ratio of the two, with each side's CPU
# time per answer (its processes' user + system time over its slices, divided by the requests
# wrk counted). nginx and wrk are installed with apt-get when missing.
#
# Settings: PLIMSOLL_BIN=path benchmarks that build of `plimsoll` instead of building this
# tree's (release); WRK_THREADS (default 1) wrk threads; NGINX_WORKERS (default auto); SLICES
# (default 4; 1 floods the server, then nginx, each once);
# PERF=FILE records the server with `perf record` during the flood (Debian: linux-perf) and
# prints where its time went. Call graphs need frame pointers: build the binary for it with
# RUSTFLAGS="-C force-frame-pointers=yes" CARGO_TARGET_DIR=/tmp/fp cargo build --release, then
# PLIMSOLL_BIN=/tmp/fp/release/plimsoll (PERF_CALL_GRAPH=dwarf works without, at a far higher cost).
set -euo pipefail
cd "$(dirname "$0")/.."
target_refusals=""
if [ "${1:-}" = "--refusals" ]; then
  target_refusals=${2:?"--refusals needs a count"}
  shift 2
fi
duration=${1:-10}
connections=${2:-32}
calibration=3
# shellcheck source=ci/bench-server.sh
source ci/bench-server.sh
if [ "${NGINX:-1}" = 1 ] && [ -z "$target_refusals" ]; then install_missing wrk nginx; else install_missing wrk; fi
threads=${WRK_THREADS:-1}
bin=$(plimsoll_bin)
work=$(mktemp -d)
server_pid=""
holders=""
sampler=""
nginx_pid=""
trap 'kill $server_pid $holders $sampler $nginx_pid 2>/dev/null || true; rm -rf "$work"' EXIT

# The held jobs must outlast the flood (their clients hang up after it), and the pool's timeout
# (B1) must outlast the holds.
max_flood=${duration}
if [ -n "$target_refusals" ]; then max_flood=600; fi
hold_s=$((calibration + max_flood + 10))
start_server "$hold_s" "$bin"

kb() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$server_pid/status"; }
# The CPU time (user + system, clock ticks) the given processes have used so far, all threads.
cpu_ticks() { for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk '{s += $1} END {print s}'; }
mb() { awk -v kb="$1" 'BEGIN {printf "%.1f MB", kb / 1024}'; }
write_request
flood() { wrk -t"$threads" -c"$connections" -d"${1}s" --latency -s "$work/post.lua" "${2:-$url}/v1/digitize"; }
# One slice of the flood against URL, answered by the processes PIDS: wrk's report goes to
# wrk-SIDE-I.txt, the processes' CPU ticks before and after it to a line of cpu-SIDE.txt.
slice() {
  local pids=$1 target=$2 side=$3 i=$4 before
  before=$(cpu_ticks $pids)
  flood "$slice_s" "$target" >"$work/wrk-$side-$i.txt"
  echo "$before $(cpu_ticks $pids)" >>"$work/cpu-$side.txt"
  awk -v what="slice $i/$slices, $side:" '$1 == "99%" {p99 = $2} /^Requests\/sec/ {rate = $2}
    END {printf "%s %.0f requests/s, p99 %s\n", what, rate, p99}' "$work/wrk-$side-$i.txt"
}

# nginx doing the same work: the same 503 body and headers, one JSON access-log line per
# request (written as nginx writes it by default: unbuffered, a write per request).
start_nginx() {
  nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
  nport=$(free_port)
  body=$(python3 - "$work/refusal.json" <<'PY'
import json, sys
body = json.load(open(sys.argv[1]))
assert body["code"] == "overloaded", body
body["request_id"] = "REQUEST_ID"
# nginx string literal: escape what nginx would interpret, then put its variable in.
text = json.dumps(body, separators=(",", ":")).replace("\\", "\\\\").replace("'", "\\'").replace("$", "${dollar}")
print(text.replace("REQUEST_ID", "$request_id"))
PY
  )
  retry_after=$(awk -F': ' 'tolower($1) == "retry-after" {print $2}' "$work/refusal.headers" | tr -d '\r')
  mkdir -p "$work/nginx"
  cat > "$work/nginx.conf" <<CONF
daemon off;
worker_processes ${NGINX_WORKERS:-auto};
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  geo \$dollar { default "$"; }
  log_format problem escape=json '{"timestamp":"\$time_iso8601","level":"ERROR","request_id":"\$request_id","method":"\$request_method","path":"\$uri","status":\$status,"stage":"admission","error":"overloaded","code":"overloaded","stack":"","duration_ms":\$request_time}';
  server {
    listen 127.0.0.1:$nport;
    access_log $work/nginx/access.log problem;
    client_max_body_size 64m;
    location = /v1/digitize {
      add_header X-Request-Id \$request_id always;
      add_header Retry-After $retry_after always;
      default_type application/problem+json;
      return 503 '$body';
    }
  }
}
CONF
  "$nginx_bin" -c "$work/nginx.conf" -p "$work/nginx" 2>"$work/nginx/start.err" &
  nginx_pid=$!
  nurl="http://127.0.0.1:$nport"
  for _ in $(seq 50); do curl -s -o /dev/null "$nurl/v1/digitize" && break; sleep 0.1; done
  curl -s -X POST -H 'content-type: image/png' --data-binary @"$work/tiny.png" "$nurl/v1/digitize" >"$work/nginx.json"
  python3 - "$work/nginx.json" "$work/refusal.json" <<'PY' || { cat "$work/nginx/start.err" >&2; exit 1; }
import json, sys
mine, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert set(mine) == set(ref) and mine["code"] == "overloaded", (mine, ref)
print("nginx answers the same problem body:", json.dumps(mine)[:110], "…")
PY
  # nginx's workers answer; its master only waits.
  nginx_workers=$(pgrep -P "$nginx_pid" | tr '\n' ' ')
}

# Hold every slot for longer than the flood.
hold_every_slot "$hold_s"
rss_before=$(kb VmRSS)
echo "pool saturated: $busy/$workers busy; RSS before: $(mb "$rss_before")"
# One real refusal, for nginx to answer in kind.
curl -s -D "$work/refusal.headers" -o "$work/refusal.json" -X POST -H 'content-type: image/png' \
  --data-binary @"$work/tiny.png" "$url/v1/digitize"
nginx_workers=""
nurl=""
if [ "${NGINX:-1}" = 1 ] && [ -z "$target_refusals" ]; then start_nginx; fi

# RSS every second while the flood runs.
( while kill -0 "$server_pid" 2>/dev/null; do kb VmRSS; sleep 1; done ) >"$work/rss.txt" &
sampler=$!

started=$(date +%s.%N)
if [ -n "$target_refusals" ]; then
  flood "$calibration" >"$work/calibration.txt"
  rate=$(awk '/^Requests\/sec/ {print $2}' "$work/calibration.txt")
  done_so_far=$(refused)
  duration=$(python3 -c "import math; print(max(1, min($max_flood, math.ceil(1.1 * ($target_refusals - $done_so_far) / $rate))))")
  echo "calibration: $rate refusals/s over ${calibration} s; flooding for ${duration} s more"
fi
perf_pid=""
if [ -n "${PERF:-}" ]; then
  perf record -F 999 --call-graph ${PERF_CALL_GRAPH:-fp} -o "$PERF" -p "$server_pid" 2>"$work/perf.err" &
  perf_pid=$!
fi
# Beside nginx the flood is cut into slices, each side's in turn (SLICES, default 4, each of
# DURATION_S / SLICES whole seconds, at least one): the machine's speed drifts by a fifth within a
# minute here, and in turns the drift falls on both sides alike, where one side's whole flood
# after the other's took it all. Each side's CPU time is summed over its own slices.
slices=1
[ -n "$nginx_workers" ] && slices=${SLICES:-4}
slice_s=$(( duration / slices > 0 ? duration / slices : 1 ))
for i in $(seq "$slices"); do
  slice "$server_pid" "$url" plimsoll "$i"
  [ -z "$nginx_workers" ] || slice "$nginx_workers" "$nurl" nginx "$i"
done
[ -n "$nginx_workers" ] || cat "$work/wrk-plimsoll-1.txt"
ended=$(date +%s.%N)
if [ -n "$perf_pid" ]; then
  kill -INT "$perf_pid"; wait "$perf_pid" || true
  echo "==> where the server's time went (perf report --no-children, top entries)"
  perf report -i "$PERF" --no-children --percent-limit 1.5 --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
fi
rss_after=$(kb VmRSS)
kill "$sampler" 2>/dev/null || true
refusals=$(refused)
echo
if [ -n "$nginx_workers" ]; then
  echo "refusals counted by the server: $refusals over its $slices slices of ${slice_s} s"
else
  rate=$(python3 -c "print(round($refusals / ($ended - $started)))")
  echo "refusals counted by the server: $refusals in $(python3 -c "print(round($ended - $started, 1))") s ($rate/s, calibration included)"
fi
during=$(awk 'NR == 1 || $1 < lo {lo = $1} $1 > hi {hi = $1} END {printf "%.1f–%.1f MB", lo / 1024, hi / 1024}' "$work/rss.txt")
echo "RSS before the flood: $(mb "$rss_before"); during (1 s samples): $during; right after: $(mb "$rss_after"); peak (VmHWM): $(mb "$(kb VmHWM)")"
echo "RSS every second of the flood (MB): $(awk '{printf "%s%.1f", (NR > 1 ? " " : ""), $1 / 1024}' "$work/rss.txt")"
echo "log: $(wc -l <"$work/server.log") lines, $(du -m "$work/server.log" | cut -f1) MB, $(grep -c '"code":"overloaded"' "$work/server.log") F3 lines of refusals"

# The holders hang up: their jobs are cancelled (B3) and the slots' release closes the open
# refusal samples.
kill $holders 2>/dev/null || true
holders=""
for _ in $(seq 100); do
  [ "$(metric 'plimsoll_workers_busy{pool="digitize"}')" = "0" ] && break
  sleep 0.1
done
sleep 1
echo "RSS once the slots are free again: $(mb "$(kb VmRSS)")"

[ "${NGINX:-1}" = 1 ] && [ -z "$target_refusals" ] || exit 0

echo
echo "nginx log: $(wc -l <"$work/nginx/access.log") lines"

# Side by side: each side's requests and CPU ticks summed over its slices, its rate their
# requests over their seconds, each latency percentile the median of its slices'.
python3 - "$(getconf CLK_TCK)" "$work" "$slices" <<'PY'
import re, statistics, sys
ticks_per_s, work, slices = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def read(side):
    total = seconds = non = 0
    lat = {"50": [], "90": [], "99": []}
    for i in range(1, slices + 1):
        text = open(f"{work}/wrk-{side}-{i}.txt").read()
        n, s, unit = re.search(r"(\d+) requests in ([\d.]+)(ms|s)\b", text).groups()
        total += int(n)
        seconds += float(s) / (1000.0 if unit == "ms" else 1.0)
        found = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
        non += int(found.group(1)) if found else 0
        for p, v, u in re.findall(r"^\s+(50|90|99)%\s+([\d.]+)(us|ms|s)\s*$", text, re.M):
            lat[p].append(float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[u])
    ticks = sum(b - a for a, b in (map(int, l.split()) for l in open(f"{work}/cpu-{side}.txt")))
    cpu_us = ticks / ticks_per_s * 1e6 / total
    return total / seconds, {p: statistics.median(v) for p, v in lat.items()}, non, total, cpu_us
p, n = read("plimsoll"), read("nginx")
print()
print(f"{'':10} {'refusals/s':>11} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'CPU µs':>7} {'503s':>10}")
for name, (rate, lat, non, total, cpu_us) in (("plimsoll", p), ("nginx", n)):
    print(f"{name:10} {rate:11,.0f} {lat['50']:8.2f} {lat['90']:8.2f} {lat['99']:8.2f} {cpu_us:7.1f} {non:>5}/{total}")
ratio = p[0] / n[0]
rate_ok, p99_ok = ratio >= 1.0, p[1]["99"] <= n[1]["99"]
print(f"ratio: {ratio:.2f}x nginx's rate ({'meets' if rate_ok else 'misses'} the 1.0x goal); "
      f"p99 {p[1]['99']:.2f} ms vs nginx {n[1]['99']:.2f} ms ({'meets' if p99_ok else 'misses'} p99 <= nginx); "
      f"CPU per answer {p[4]:.1f} µs vs nginx {n[4]:.1f} µs ({p[4] / n[4]:.2f}x); "
      f"each side in {slices} slices, in turns")
PY
