#!/usr/bin/env bash
# Gate the Python example service the way a user's CI gates its own service: install its
# requirements, run its unit tests, start it with test hooks on, wait for /healthz, run
# ci/gate.sh against it (or ci/action.sh, the GitHub Action's step), stop it.
#
#   bash examples/python-service/gate.sh              # scaled run (fast): small timeouts, a queue
#   MODE=contract bash examples/python-service/gate.sh  # the contract's own values (B1 waits 60 s)
#
# Settings, all from the environment:
#   MODE          scaled (default) or contract
#   PORT          port of the service (default 18181)
#   REPORT_DIR    where the gate's reports go (default ./plimsoll-reports/python-service)
#   PLIMSOLL_BIN  the plimsoll binary (default: ci/gate.sh builds it in release mode)
#   GATE_STEPS, LOAD_DURATION, CHECK_ARGS, LOAD_ARGS, STRICT   passed on to ci/gate.sh
#                 (STRICT=1, its default, makes every skipped check fail)
#   PYTHON        the interpreter (default python3)
#   SETUP         1 (default): install the requirements and run the unit tests first; 0: both
#                 were done already (a CI that gates the service several ways does them once)
#   VIA_ACTION    1: run the gate through ci/action.sh, the GitHub Action's one step, with the
#                 settings above passed as the action's INPUT_* variables (as action.yml does);
#                 it also appends its Markdown summary to GITHUB_STEP_SUMMARY when that is set
# Exit: ci/gate.sh's (0 pass, 1 a clause failed, 2 a step could not run); 2 if the service
# could not be installed or started.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
MODE="${MODE:-scaled}"
PORT="${PORT:-18181}"
PYTHON="${PYTHON:-python3}"
export REPORT_DIR="${REPORT_DIR:-./plimsoll-reports/python-service}"

if [[ "${SETUP:-1}" == 1 ]]; then
  echo "==> python-service: installing requirements"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" || exit 2
  echo "==> python-service: unit tests"
  (cd "$here" && "$PYTHON" -m unittest discover -s tests) || exit 1
fi

work="$(mktemp -d)"

service_env=(PLIMSOLL_TEST_HOOKS=1 PLIMSOLL_TEMP_DIR="$work/tmp" PLIMSOLL_LOG_FILE="$work/service.jsonl")
check_args=()
case "$MODE" in
  scaled)
    # The scaled values every quick gate uses: conformance/scaled.env, NAME=VALUE lines.
    while IFS= read -r line; do
      [[ -z "$line" || "$line" == \#* ]] || service_env+=("$line")
    done < "$root/conformance/scaled.env"
    check_args+=(--allow-overrides) ;;
  contract) ;;
  *) echo "gate: MODE must be scaled or contract, got '$MODE'" >&2; exit 2 ;;
esac

echo "==> python-service: starting on 127.0.0.1:$PORT ($MODE)"
env "${service_env[@]}" PYTHON="$PYTHON" "$here/run.sh" --port "$PORT" > "$work/service.out" 2>&1 &
pid=$!
stop() {
  kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$work"
}
trap stop EXIT

up=0
for _ in $(seq 1 100); do
  if ! kill -0 "$pid" 2> /dev/null; then break; fi
  if "$PYTHON" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
      "http://127.0.0.1:$PORT/healthz" 2> /dev/null; then up=1; break; fi
  sleep 0.2
done
if (( ! up )); then
  echo "gate: the Python service did not come up" >&2
  cat "$work/service.out" >&2
  exit 2
fi

read -r -a extra <<< "${CHECK_ARGS:-}"
load_args="${LOAD_ARGS:-}"
[[ "$MODE" == scaled ]] && load_args="--allow-overrides $load_args"
if [[ "${VIA_ACTION:-0}" == 1 ]]; then
  strict=${STRICT:-1}
  case "$strict" in 1) strict=true ;; 0) strict=false ;; esac
  INPUT_TARGET="http://127.0.0.1:$PORT" INPUT_TEMP_DIR="$work/tmp" INPUT_SERVER_LOG="$work/service.jsonl" \
    INPUT_STEPS="${GATE_STEPS:-check burst overload}" INPUT_STRICT="$strict" \
    INPUT_ALLOW_OVERRIDES="$([[ "$MODE" == scaled ]] && echo true || echo false)" \
    INPUT_REPORTS="$REPORT_DIR" INPUT_LOAD_DURATION="${LOAD_DURATION:-10}" \
    INPUT_CHECK_ARGS="${CHECK_ARGS:-}" INPUT_LOAD_ARGS="${LOAD_ARGS:-}" \
    bash "$root/ci/action.sh"
else
  TARGET="http://127.0.0.1:$PORT" TEMP_DIR="$work/tmp" SERVER_LOG="$work/service.jsonl" \
    CHECK_ARGS="${check_args[*]} ${extra[*]}" LOAD_ARGS="$load_args" \
    bash "$root/ci/gate.sh"
fi
code=$?
if (( code != 0 )); then
  echo "==> python-service: the service's output (last 40 lines)"
  tail -n 40 "$work/service.out"
fi
exit "$code"
