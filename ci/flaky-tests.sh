#!/usr/bin/env bash
# Runs the whole test suite (the README's test command) N times in a row and reports every test
# that failed in any run, with how often. A flaky test is a defect: this must end in
# "0 tests ever failed".
#
#   bash ci/flaky-tests.sh [N]        (default 5)
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
out=target/flaky-tests
mkdir -p "$out"
bash ci/test.sh --no-run >/dev/null 2>&1 || {
  echo "flaky-tests: the tests do not build" >&2
  exit 2
}
: >"$out/failures.txt"
clean=0
for i in $(seq "$runs"); do
  start=$(date +%s)
  bash ci/test.sh --no-fail-fast >"$out/run-$i.log" 2>&1
  code=$?
  # nextest prints one "FAIL [ time ] (k/n) crate::binary test" line per failed test.
  grep -E '^\s+(FAIL|SIGSEGV|SIGABRT|TIMEOUT) ' "$out/run-$i.log" \
    | sed -E 's/^\s+[A-Z]+ \[[^]]*\] (\([^)]*\) )?//' | sort -u >"$out/run-$i.failed"
  # One summary per half of the suite (shared, then alone).
  summary=$(grep -E '^\s+Summary ' "$out/run-$i.log" | sed -E 's/^\s+//' | paste -sd ';' -)
  printf 'run %d/%d: exit %d in %ds: %s\n' "$i" "$runs" "$code" $(( $(date +%s) - start )) "${summary:-no summary}"
  if [[ $code -eq 0 && ! -s "$out/run-$i.failed" ]]; then
    clean=$((clean + 1))
  else
    sed 's/^/    failed: /' "$out/run-$i.failed"
    cat "$out/run-$i.failed" >>"$out/failures.txt"
  fi
done
echo
if [[ -s "$out/failures.txt" ]]; then
  echo "tests that ever failed (runs failed, test):"
  sort "$out/failures.txt" | uniq -c | sort -rn
  echo "$clean passed, $((runs - clean)) failed"
  exit 1
fi
echo "0 tests ever failed in $runs runs"
echo "$clean passed, 0 failed"
