#!/usr/bin/env bash
# The outside judges of the OpenAPI document (spec/openapi.json), each against the document as
# generated, with this repository's configuration and its stated exceptions:
#   1. openapi-spec-validator: the document is valid OpenAPI 3.1;
#   2. Redocly CLI lint, recommended ruleset (redocly.yaml, .redocly.lint-ignore.yaml): zero
#      errors, zero warnings;
#   3. the document's example images are real: the reference server digitizes each of them;
#   4. Schemathesis `--checks all` (schemathesis.toml, ci/schemathesis_hooks.py) against the
#      reference server with test hooks on: zero failures.
# Builds nothing: give it the plimsoll binary. Installs the judges when missing. Runs every judge
# and exits non-zero if any of them failed.
#
#   bash ci/openapi-judges.sh [PLIMSOLL_BIN]   (default: $PLIMSOLL_BIN, else target/debug/plimsoll)
#   bash ci/openapi-judges.sh --tools          installs the judges and exits (CI does it early)
#
# OPENAPI_JUDGES_MAX_EXAMPLES (default 50) bounds Schemathesis' fuzzing: about a minute on two
# cores with a debug build. SCHEMATHESIS_SEED replays a run (Schemathesis prints its seed).
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
REDOCLY_VERSION=2.77.0
max_examples=${OPENAPI_JUDGES_MAX_EXAMPLES:-50}
doc=spec/openapi.json

install_tools() {
  if ! python3 -c 'import openapi_spec_validator' 2>/dev/null ||
    [ "$(python3 -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" != "$SCHEMATHESIS_VERSION" ]; then
    python3 -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" openapi-spec-validator
  fi
  command -v npx >/dev/null || {
    echo "openapi-judges: needs node and npm (npx) for @redocly/cli" >&2
    return 2
  }
}
redocly() { npx --yes "@redocly/cli@$REDOCLY_VERSION" "$@"; }

if [ "${1:-}" = --tools ]; then
  install_tools
  redocly --version >/dev/null
  exit
fi
bin=${1:-${PLIMSOLL_BIN:-target/debug/plimsoll}}

step() { printf '\n==> %s\n' "$*"; }
failed=()
judge() {
  local name=$1
  shift
  if "$@"; then
    echo "openapi-judges: $name: passed"
  else
    echo "openapi-judges: $name: FAILED" >&2
    failed+=("$name")
  fi
}

[ -x "$bin" ] || {
  echo "openapi-judges: no plimsoll binary at $bin (build it: cargo build -p plimsoll)" >&2
  exit 2
}
started=$(date +%s)

step "tools"
install_tools || exit 2
python3 -m schemathesis.cli --version
echo "redocly $(redocly --version)"

step "openapi-spec-validator"
judge openapi-spec-validator python3 -m openapi_spec_validator "$doc"

step "Redocly lint (recommended ruleset)"
lint_redocly() {
  local out
  out=$(redocly lint "$doc" 2>&1) || {
    echo "$out"
    return 1
  }
  echo "$out"
  # The exit status counts only errors: a warning fails this judge too.
  if grep -qE 'You have [0-9]+ warnings?' <<<"$out"; then
    return 1
  fi
}
judge redocly lint_redocly

step "the reference server (test hooks on, short B1 timeouts)"
work=$(mktemp -d)
server_pid=""
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
trap 'stop_server; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
# The timeouts are the contract's own deployment overrides (B1): a `hold=` hook Schemathesis
# draws, or a huge design, ends in a 504 within 3 s instead of a minute.
PLIMSOLL_TEST_HOOKS=1 DIGITIZE_TIMEOUT_MS=3000 EXPORT_TIMEOUT_MS=3000 \
  "$bin" serve --bind 127.0.0.1 --port "$port" --temp-dir "$work/jobs" --log-file "$work/server.log" \
  2>"$work/serve.err" &
server_pid=$!
for _ in $(seq 100); do
  curl -fs "$url/healthz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if ! curl -fs "$url/healthz" >/dev/null 2>&1; then
  echo "openapi-judges: the server did not start:" >&2
  cat "$work/serve.err" >&2
  exit 2
fi
echo "listening on $url (pid $server_pid)"

step "the document's example images digitize"
digitize_examples() {
  python3 - "$doc" "$url" <<'PY'
import base64, json, sys, urllib.request

doc, url = json.load(open(sys.argv[1])), sys.argv[2]
op = next(o for p in doc["paths"].values() for o in p.values() if o.get("operationId") == "digitize")
path = next(p for p, item in doc["paths"].items() if op in item.values())
seen = 0
for media_type, media in op["requestBody"]["content"].items():
    for name, example in media.get("examples", {}).items():
        uri = example["externalValue"]
        head, data = uri.split(",", 1)
        assert head == f"data:{media_type};base64", head
        request = urllib.request.Request(url + path, data=base64.b64decode(data), method="POST",
                                         headers={"Content-Type": media_type})
        with urllib.request.urlopen(request, timeout=30) as reply:
            design = json.load(reply)
        print(f"{media_type} example `{name}`: {reply.status}, {design['stitch_count']} stitches, "
              f"{len(design['threads'])} threads")
        seen += 1
missing = [t for t, m in op["requestBody"]["content"].items() if not m.get("examples")]
if missing or not seen:
    sys.exit(f"no example image for {missing or 'any media type'}")
PY
}
judge "example images" digitize_examples

step "Schemathesis --checks all (max $max_examples examples per operation)"
run_schemathesis() {
  HYPOTHESIS_STORAGE_DIRECTORY=target/schemathesis/hypothesis-storage \
    python3 -m schemathesis.cli --no-color run "$doc" --url "$url" --checks all \
    --max-examples "$max_examples" --request-timeout 30 \
    ${SCHEMATHESIS_SEED:+--seed "$SCHEMATHESIS_SEED"}
}
judge schemathesis run_schemathesis
if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "openapi-judges: the server died during the run:" >&2
  tail -20 "$work/serve.err" >&2
  failed+=("server alive")
fi
stop_server

echo
echo "openapi-judges: $(($(date +%s) - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "openapi-judges: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "openapi-judges: every judge passed"
