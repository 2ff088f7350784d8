#!/usr/bin/env bash
# The one step of the Plimsoll GitHub Action (action.yml at the repository root): installs the
# `plimsoll` binary unless PLIMSOLL_BIN names one, runs ci/gate.sh with the action's inputs,
# and appends a Markdown summary of every check to $GITHUB_STEP_SUMMARY. Uploads nothing: the
# JUnit, HTML and JSON reports stay in the reports folder for the workflow's own steps.
#
# The inputs arrive as environment variables, as action.yml's `env:` passes them (GitHub gives a
# composite action's steps no INPUT_* of its own; a hyphen in an input's name is an underscore):
#   INPUT_TARGET           base URL of the running service (required)
#   INPUT_CONTRACT         a contract file to judge against (default: the one plimsoll embeds)
#   INPUT_STEPS            gate steps (default "check burst overload"; also steady, soak)
#   INPUT_STRICT           true (default): a skipped check fails; false: skips pass
#   INPUT_ALLOW_OVERRIDES  true: adopt the service's values in overridable fields (default false)
#   INPUT_REPORTS          the reports folder (default plimsoll-reports)
#   INPUT_VERSION          plimsoll version to install (default: the newest release)
#   INPUT_TEMP_DIR         the service's temp folder, if this machine sees it
#   INPUT_SERVER_LOG       the service's JSON log file, if this machine reads it
#   INPUT_LOAD_DURATION    seconds of the steady, overload and soak profiles (default 10)
#   INPUT_CHECK_ARGS, INPUT_LOAD_ARGS   more arguments for `plimsoll check` / `plimsoll load`
#                          (split at white space, as ci/gate.sh splits CHECK_ARGS and LOAD_ARGS)
# Also read: PLIMSOLL_BIN (skip the install), GITHUB_STEP_SUMMARY (where the summary goes; unset:
# standard output only), RUNNER_TEMP (where the binary is installed).
# Exit: ci/gate.sh's (0 pass, 1 a check failed, 2 a step could not run); 2 if the inputs are
# wrong or plimsoll could not be installed.
set -uo pipefail

# Where plimsoll's releases and source live: the one place to change for a fork.
PLIMSOLL_REPOSITORY="${PLIMSOLL_REPOSITORY:-https://github.com/your-org/plimsoll}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fail() {
  echo "plimsoll action: $*" >&2
  exit 2
}

# `true`/`false` (GitHub's booleans arrive as those strings) as 1/0.
flag() {
  case "$2" in
    true | True | TRUE | 1) echo 1 ;;
    false | False | FALSE | 0 | "") echo 0 ;;
    *) fail "input $1 must be true or false, not '$2'" ;;
  esac
}

# The Rust target triple of this runner, as the release archives are named.
triple() {
  local arch os
  case "$(uname -m)" in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) return 1 ;;
  esac
  case "$(uname -s)" in
    Linux) os=unknown-linux-gnu ;;
    Darwin) os=apple-darwin ;;
    *) return 1 ;;
  esac
  echo "$arch-$os"
}

sha256() {
  if command -v sha256sum > /dev/null; then sha256sum "$1"; else shasum -a 256 "$1"; fi | cut -d' ' -f1
}

# The release archive for this runner and its checksum (cargo-dist's names, see
# dist-workspace.toml), when both exist: the binary's path, or nothing.
from_release() {
  local dest=$1 version=$2 name url base
  name="plimsoll-$(triple)" || return 0
  if [[ "$version" == latest ]]; then
    base="$PLIMSOLL_REPOSITORY/releases/latest/download"
  else
    base="$PLIMSOLL_REPOSITORY/releases/download/v${version#v}"
  fi
  url="$base/$name.tar.xz"
  curl -fsSL --retry 3 -o "$dest/$name.tar.xz" "$url" 2> /dev/null &&
    curl -fsSL --retry 3 -o "$dest/$name.tar.xz.sha256" "$url.sha256" 2> /dev/null || {
    echo "plimsoll action: no release archive with a checksum at $url" >&2
    return 0
  }
  local expected actual
  read -r expected _ < "$dest/$name.tar.xz.sha256"
  actual=$(sha256 "$dest/$name.tar.xz")
  [[ "$expected" == "$actual" ]] || fail "$url: SHA-256 $actual, but its .sha256 says $expected"
  tar -xJf "$dest/$name.tar.xz" -C "$dest" || fail "could not unpack $url"
  echo "$dest/$name/plimsoll"
}

install_plimsoll() {
  local version=${INPUT_VERSION:-latest} dest bin
  dest="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/plimsoll-install"
  mkdir -p "$dest" || fail "cannot create $dest"
  bin=$(from_release "$dest" "$version") || exit 2
  if [[ -z "$bin" ]]; then
    local tag=()
    [[ "$version" != latest ]] && tag=(--tag "v${version#v}")
    echo "plimsoll action: building plimsoll from $PLIMSOLL_REPOSITORY ${tag[*]}" >&2
    cargo install --locked --quiet --root "$dest" --git "$PLIMSOLL_REPOSITORY" "${tag[@]}" plimsoll >&2 ||
      fail "cargo install of plimsoll failed"
    bin="$dest/bin/plimsoll"
  fi
  [[ -x "$bin" ]] || fail "no plimsoll binary at $bin"
  echo "$bin"
}

: "${INPUT_TARGET:?set INPUT_TARGET (the action's target input) to the service's base URL}"
steps="${INPUT_STEPS:-check burst overload}"
reports="${INPUT_REPORTS:-plimsoll-reports}"
strict=$(flag strict "${INPUT_STRICT:-true}") || exit 2
overrides=$(flag allow-overrides "${INPUT_ALLOW_OVERRIDES:-false}") || exit 2

shared=()
[[ -n "${INPUT_CONTRACT:-}" ]] && shared+=(--contract "$INPUT_CONTRACT")
((overrides)) && shared+=(--allow-overrides)

if [[ -z "${PLIMSOLL_BIN:-}" ]]; then
  PLIMSOLL_BIN=$(install_plimsoll) || exit 2
fi
echo "plimsoll action: $("$PLIMSOLL_BIN" --version 2> /dev/null || echo "$PLIMSOLL_BIN")"

TARGET="$INPUT_TARGET" TEMP_DIR="${INPUT_TEMP_DIR:-}" SERVER_LOG="${INPUT_SERVER_LOG:-}" \
  STRICT="$strict" REPORT_DIR="$reports" GATE_STEPS="$steps" PLIMSOLL_BIN="$PLIMSOLL_BIN" \
  LOAD_DURATION="${INPUT_LOAD_DURATION:-10}" \
  CHECK_ARGS="${shared[*]} ${INPUT_CHECK_ARGS:-}" LOAD_ARGS="${shared[*]} ${INPUT_LOAD_ARGS:-}" \
  bash "$here/gate.sh"
code=$?

# The job summary: the gate's verdict, then each step's own Markdown (`--markdown`, written by
# the binary in one table layout), or a line saying the step left none.
summary=$(
  if ((code == 0)); then echo "## Plimsoll gate: pass"; else echo "## Plimsoll gate: FAIL (exit $code)"; fi
  echo
  echo "Reports (JUnit \`*.junit.xml\`, HTML \`*.html\`, JSON \`*.json\`): \`$reports\`."
  for s in $steps; do
    name=$s
    [[ $s == check ]] || name="load-$s"
    echo
    if [[ -s "$reports/$name.md" ]]; then
      cat "$reports/$name.md"
    else
      echo "### \`$name\`: did not run (no report; see the log)"
    fi
  done
)
if [[ -n "${GITHUB_STEP_SUMMARY:-}" && -n "$summary" ]]; then
  printf '%s\n' "$summary" >> "$GITHUB_STEP_SUMMARY" || fail "cannot write $GITHUB_STEP_SUMMARY"
  echo "plimsoll action: summary appended to $GITHUB_STEP_SUMMARY"
fi
exit "$code"
