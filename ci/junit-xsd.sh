#!/usr/bin/env bash
# Validates JUnit XML files against the JUnit schema CI tools read them by, so a report that a
# strict reader (Jenkins' xunit plugin, a GitHub test reporter) would reject fails here first.
#
#   bash ci/junit-xsd.sh FILE…      validates each file; exit 1 if any is invalid
#   bash ci/junit-xsd.sh --tools    installs the validator and the schema, and exits
#
# The schema is `junit-10.xsd` of the Jenkins xunit plugin (MIT licence, Gregory Boissinot), in
# the copy pytest validates its own `--junitxml` against. Nothing is vendored: the file comes
# from pytest's source distribution on PyPI (`testing/example_scripts/junit-10.xsd`) at a pinned
# version, and its SHA-256 is checked. (windyroad's JUnit.xsd, Apache Ant's, has no `skipped`
# element at all, so no report that names a skipped check can be valid under it.)
# The validator is xmllint (Debian's libxml2-utils), installed when missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PYTEST_VERSION=9.2.0
XSD_SHA256=a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6
xsd="$root/target/junit-xsd/junit-10.xsd"

who=junit-xsd
# shellcheck source=ci/as-root.sh
source "$root/ci/as-root.sh"

install_xmllint() {
  command -v xmllint >/dev/null && return
  echo "junit-xsd: installing xmllint (Debian's libxml2-utils)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libxml2-utils >/dev/null
}

fetch_xsd() {
  if [ -f "$xsd" ] && echo "$XSD_SHA256  $xsd" | sha256sum --check --status; then
    return
  fi
  echo "junit-xsd: fetching junit-10.xsd from pytest $PYTEST_VERSION's source distribution" >&2
  local work
  work=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    "pytest==$PYTEST_VERSION" -d "$work"
  tar -xzf "$work/pytest-$PYTEST_VERSION.tar.gz" -C "$work" \
    "pytest-$PYTEST_VERSION/testing/example_scripts/junit-10.xsd"
  mkdir -p "$(dirname "$xsd")"
  mv "$work/pytest-$PYTEST_VERSION/testing/example_scripts/junit-10.xsd" "$xsd"
  rm -rf "$work"
  echo "$XSD_SHA256  $xsd" | sha256sum --check --quiet || {
    echo "junit-xsd: $xsd is not the pinned schema" >&2
    rm -f "$xsd"
    return 2
  }
}

install_xmllint
fetch_xsd
if [ "${1:-}" = --tools ]; then
  exit 0
fi
if [ $# -eq 0 ]; then
  echo "usage: bash ci/junit-xsd.sh FILE…" >&2
  exit 2
fi

count() { grep -o "$1" "$2" | wc -l; }
invalid=0
for file in "$@"; do
  if [ ! -f "$file" ]; then
    echo "junit-xsd: $file: missing" >&2
    invalid=1
  elif errors=$(xmllint --noout --schema "$xsd" "$file" 2>&1); then
    echo "junit-xsd: $file: valid ($(count '<testcase ' "$file") testcases," \
      "$(count '<failure' "$file") failed, $(count '<skipped' "$file") skipped)"
  else
    echo "$errors" >&2
    echo "junit-xsd: $file: INVALID against junit-10.xsd" >&2
    invalid=1
  fi
done
exit "$invalid"
