#!/usr/bin/env bash
# Gate the Python bridge the way a mesh-node team's CI gates its own: install its requirement,
# run its unit tests, then `plimsoll check --bridge-command` — the checker starts the bridge,
# plays the relay it dials and the local handler it relays to, and judges R1–R6 (--strict).
#
#   bash examples/python-bridge/gate.sh
#
# Settings, all from the environment:
#   PLIMSOLL_BIN  the plimsoll binary (default: built in release mode with cargo)
#   REPORT_DIR    where the reports go (default ./plimsoll-reports/python-bridge)
#   PYTHON        the interpreter (default python3)
#   SETUP         1 (default): install the requirement and run the unit tests first; 0: both were
#                 done already
#   BRIDGE_FAULTS the standard faults the relay's sockets are also judged through (default
#                 "latency vanish"; empty: none)
# Exit: plimsoll check's, the worst of its runs (0 pass, 1 a clause failed, 2 the bridge could not
# be judged); 2 if the requirement could not be installed, 1 if a unit test failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
REPORT_DIR="$(mkdir -p "${REPORT_DIR:-./plimsoll-reports/python-bridge}" && cd "${REPORT_DIR:-./plimsoll-reports/python-bridge}" && pwd)"
if [[ -z "${PLIMSOLL_BIN:-}" ]]; then
  cargo build --release --locked -q -p plimsoll --manifest-path "$root/Cargo.toml" || exit 2
  PLIMSOLL_BIN="$root/target/release/plimsoll"
fi
PLIMSOLL_BIN="$(cd "$(dirname "$PLIMSOLL_BIN")" && pwd)/$(basename "$PLIMSOLL_BIN")"

if [[ "${SETUP:-1}" == 1 ]]; then
  echo "==> python-bridge: installing requirements"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" || exit 2
  echo "==> python-bridge: unit tests"
  (cd "$here" && "$PYTHON" -m unittest discover -s tests) || exit 1
fi

cd "$here" || exit 2
bridge="exec $PYTHON -m plimsoll_bridge --relay-url {relay_url} --upstream {upstream_url}"
echo "==> python-bridge: plimsoll check --bridge-command"
"$PLIMSOLL_BIN" check --strict --bridge-command "$bridge" \
  --junit "$REPORT_DIR/check.junit.xml" --html "$REPORT_DIR/check.html" --json "$REPORT_DIR/check.json"
status=$?
# The same clauses with the relay's sockets through a fault: a far relay, and one that vanishes
# (the socket R6 drops reaches the bridge as a reset, which it must survive as a close).
for fault in ${BRIDGE_FAULTS-latency vanish}; do
  echo "==> python-bridge: plimsoll check --bridge-command --fault $fault"
  "$PLIMSOLL_BIN" check --strict --bridge-command "$bridge" --fault "$fault" \
    --junit "$REPORT_DIR/check.$fault.junit.xml" --json "$REPORT_DIR/check.$fault.json"
  code=$?
  (( code > status )) && status=$code
done
exit "$status"
