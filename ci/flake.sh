#!/usr/bin/env bash
# Runs the full conformance suite N times in a row against the embedded reference server and
# counts the runs that did not pass. A flaky check is a defect: this must print 0 failed.
#
#   bash ci/flake.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
cargo build --quiet -p plimsoll
bin=target/debug/plimsoll
passed=0
failed=0
for i in $(seq "$runs"); do
  start=$(date +%s%N)
  if "$bin" check --quiet --json "target/flake-$i.json" >"target/flake-$i.log" 2>&1; then
    passed=$((passed + 1)); verdict=pass
  else
    failed=$((failed + 1)); verdict=FAIL
    grep -E '^✗' "target/flake-$i.log" || tail -5 "target/flake-$i.log"
  fi
  printf 'run %2d: %s in %d ms\n' "$i" "$verdict" $(( ($(date +%s%N) - start) / 1000000 ))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
