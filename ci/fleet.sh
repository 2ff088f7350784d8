#!/usr/bin/env bash
# Fleet mode through a real balancer: three `plimsoll serve` replicas behind nginx (Debian's
# package, configured from ci/fleet-nginx.conf), the overload profile run through it with
# `plimsoll load --target NGINX --replica URL ... --balancer POLICY`:
#
#   1. nginx `random`     — must pass (the random-split prediction);
#   2. nginx `least_conn` — must pass (the least-connections prediction);
#   3. nginx `random`, the third replica started with WORKER_POOL_SIZE=5 (the contract says 4)
#      — must fail, and the failing per-replica verdict must name that replica.
#
#   bash ci/fleet.sh [DURATION_S]        (default 6 s of load per run)
#
# Loopback only; every run bounded in time. Exit 0 when all three outcomes are as expected.
# nginx is installed with apt-get when missing. PLIMSOLL_BIN=path uses that build of `plimsoll`
# instead of building this tree's (debug); REPORT_DIR keeps the reports (default: a temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-6}

nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$nginx_bin" ]; then
  echo "installing nginx (apt-get)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; } ||
    { echo "needs nginx (apt-get install -y nginx)" >&2; exit 2; }
  nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
fi

bin=${PLIMSOLL_BIN:-}
if [ -z "$bin" ]; then
  cargo build --quiet -p plimsoll
  bin=target/debug/plimsoll
fi

work=$(mktemp -d)
reports=${REPORT_DIR:-$work/reports}
mkdir -p "$reports"
replica_pids=()
nginx_pid=""
cleanup() {
  kill "${replica_pids[@]}" $nginx_pid 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on $1 after 20 s" >&2
  return 1
}

# start_replica NAME [VAR=VALUE ...]: a replica with hooks on; its URL in $url.
start_replica() {
  local name=$1 port
  shift
  port=$(free_port)
  mkdir -p "$work/$name"
  env -u WORKER_POOL_SIZE PLIMSOLL_TEST_HOOKS=1 PLIMSOLL_TEMP_DIR="$work/$name/jobs" \
    PLIMSOLL_LOG_FILE="$work/$name/server.log" "$@" \
    "$bin" serve --port "$port" 2>"$work/$name/serve.err" &
  replica_pids+=($!)
  wait_port "$port"
  url="http://127.0.0.1:$port"
}

# start_nginx POLICY URL...: nginx in front of the replicas; its URL in $lb.
start_nginx() {
  local policy=$1 port dir servers=""
  shift
  [ -z "$nginx_pid" ] || { kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true; }
  port=$(free_port)
  dir="$work/nginx-$policy-$port"
  mkdir -p "$dir"
  for u in "$@"; do servers+="    server ${u#http://} max_fails=0;"$'\n'; done
  python3 - ci/fleet-nginx.conf "$dir/nginx.conf" "$dir" "$policy" "$port" "$servers" <<'PY'
import sys
src, dst, d, policy, port, servers = sys.argv[1:]
text = open(src).read()
text = text.replace("@DIR@", d).replace("@POLICY@", policy).replace("@PORT@", port)
open(dst, "w").write(text.replace("@SERVERS@\n", servers))
PY
  "$nginx_bin" -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf" 2>"$dir/start.err" &
  nginx_pid=$!
  wait_port "$port" || { cat "$dir/start.err" "$dir/error.log" >&2; return 1; }
  lb="http://127.0.0.1:$port"
}

# run NAME POLICY BALANCER URL...: the overload profile through nginx; its exit code in $code.
run() {
  local name=$1 policy=$2 balancer=$3 replica_args=()
  shift 3
  for u in "$@"; do replica_args+=(--replica "$u"); done
  start_nginx "$policy" "$@"
  echo
  echo "==> $name: overload through nginx $policy to $# replicas ($duration s)"
  local started=$SECONDS
  code=0
  timeout 180 "$bin" load --profile overload --duration "$duration" --target "$lb" \
    "${replica_args[@]}" --balancer "$balancer" \
    --json "$reports/$name.json" --junit "$reports/$name.junit.xml" || code=$?
  echo "    ($name: exit $code in $((SECONDS - started)) s)"
}

status=0
expect() {
  local what=$1 want=$2
  if [ "$code" = "$want" ]; then
    echo "ok: $what (exit $code)"
  else
    echo "FAILED: $what: exit $code, expected $want" >&2
    status=1
  fi
}

start_replica replica-1; r1=$url
start_replica replica-2; r2=$url
start_replica replica-3; r3=$url

run random random random "$r1" "$r2" "$r3"
expect "three correct replicas behind nginx random pass" 0

run least-conn least_conn least-conn "$r1" "$r2" "$r3"
expect "three correct replicas behind nginx least_conn pass" 0

# The third replica again, one worker too many.
kill "${replica_pids[2]}"
wait "${replica_pids[2]}" 2>/dev/null || true
start_replica replica-3-oversized WORKER_POOL_SIZE=5; r3=$url
run oversized random random "$r1" "$r2" "$r3"
expect "a fleet with one replica of 5 workers fails" 1
named=$(python3 - "$reports/oversized.json" "$r3" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
want = f"L-overload.replica[{sys.argv[2]}].busy-limit"
hit = [r for r in report["results"] if r["id"] == want and r["verdict"] == "fail"]
print(f"{want}: {hit[0]['reason']}" if hit else "")
PY
)
if [ -n "$named" ]; then
  echo "ok: the failing verdict names the replica: $named"
else
  echo "FAILED: no failing L-overload.replica[$r3].busy-limit in the report" >&2
  status=1
fi
exit $status
