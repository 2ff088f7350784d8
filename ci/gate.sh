#!/usr/bin/env bash
# The Plimsoll gate for any implementation of the contract: runs the conformance suite and the
# burst and overload load profiles against a running service, writes JUnit and HTML reports
# for the CI system, and exits non-zero if any clause failed.
#
#   TARGET=http://127.0.0.1:8080 ci/gate.sh
#
# The service must run with test hooks on (PLIMSOLL_TEST_HOOKS=1) and be idle when the gate
# starts. Settings, all from the environment:
#   TARGET        base URL of the service (required)
#   TEMP_DIR      the service's temp folder, if this machine can see it (temp-file checks)
#   SERVER_LOG    the service's log file, if this machine can read it (error-log checks)
#                 A TEMP_DIR or SERVER_LOG that is set but cannot be read stops the gate (exit 2).
#   STRICT        1 (default): `plimsoll check --strict`, every skipped check fails with its
#                 reason (e.g. F3 without SERVER_LOG), so missing evidence never passes the
#                 gate. 0: skips pass (each still named in the report). Checks that do not
#                 apply to the service's values (T2 with no queue) pass either way.
#   REPORT_DIR    where reports go (default ./plimsoll-reports)
#   PLIMSOLL_BIN  the plimsoll binary (default: build it with cargo in release mode)
#   LOAD_DURATION seconds of the overload profile (default 10)
#   CHECK_ARGS    extra arguments for `plimsoll check` (e.g. --allow-overrides --trials 2)
#   LOAD_ARGS     extra arguments for both `plimsoll load` runs
#   GATE_STEPS    which steps to run (default "check burst overload")
# Exit: 0 every step passed; 1 a clause failed; 2 a step could not run.
set -uo pipefail

: "${TARGET:?set TARGET to the base URL of the service under test}"
REPORT_DIR="${REPORT_DIR:-./plimsoll-reports}"
LOAD_DURATION="${LOAD_DURATION:-10}"
GATE_STEPS="${GATE_STEPS:-check burst overload}"
STRICT="${STRICT:-1}"
read -r -a check_extra <<< "${CHECK_ARGS:-}"
read -r -a load_extra <<< "${LOAD_ARGS:-}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PLIMSOLL_BIN:-}" ]]; then
  echo "==> building plimsoll (cargo build --release -p plimsoll)"
  (cd "$root" && cargo build --release --quiet -p plimsoll) || exit 2
  # Where cargo put it: CARGO_TARGET_DIR or a configured target-dir moves it from target/.
  target_dir=$(cd "$root" && cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])') || exit 2
  PLIMSOLL_BIN="$target_dir/release/plimsoll"
fi
if [[ ! -x "$PLIMSOLL_BIN" ]]; then
  echo "gate: $PLIMSOLL_BIN is not an executable plimsoll binary" >&2
  exit 2
fi
mkdir -p "$REPORT_DIR" || exit 2

seen=()
[[ -n "${TEMP_DIR:-}" ]] && seen+=(--temp-dir "$TEMP_DIR")
check_seen=("${seen[@]}")
[[ -n "${SERVER_LOG:-}" ]] && check_seen+=(--server-log "$SERVER_LOG")
case "$STRICT" in
  1) check_seen+=(--strict) ;;
  0) ;;
  *) echo "gate: STRICT must be 1 or 0, not '$STRICT'" >&2; exit 2 ;;
esac

worst=0
summary=()
step() {
  local name="$1"; shift
  echo
  echo "==> $name: $*"
  "$@"
  local code=$?
  summary+=("$(printf '%-14s exit %s' "$name" "$code")")
  (( code > worst )) && worst=$code
  return 0
}

for s in $GATE_STEPS; do
  case "$s" in
    check)
      step check "$PLIMSOLL_BIN" check --target "$TARGET" --quiet "${check_seen[@]}" \
        --junit "$REPORT_DIR/check.junit.xml" --html "$REPORT_DIR/check.html" \
        --json "$REPORT_DIR/check.json" --markdown "$REPORT_DIR/check.md" "${check_extra[@]}" ;;
    burst|steady|overload|soak)
      duration=()
      [[ "$s" != burst ]] && duration=(--duration "$LOAD_DURATION")
      step "load-$s" "$PLIMSOLL_BIN" load --profile "$s" --target "$TARGET" --quiet "${seen[@]}" \
        "${duration[@]}" --junit "$REPORT_DIR/load-$s.junit.xml" --html "$REPORT_DIR/load-$s.html" \
        --json "$REPORT_DIR/load-$s.json" --markdown "$REPORT_DIR/load-$s.md" \
        --report "$REPORT_DIR/load-$s.goose.html" "${load_extra[@]}" ;;
    *)
      echo "gate: unknown step '$s' in GATE_STEPS (check, burst, steady, overload, soak)" >&2
      exit 2 ;;
  esac
done

echo
echo "==> gate summary (reports in $REPORT_DIR)"
printf '  %s\n' "${summary[@]}"
if (( worst == 0 )); then echo "gate: pass"; else echo "gate: FAIL"; fi
exit "$worst"
