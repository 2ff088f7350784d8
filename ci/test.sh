#!/usr/bin/env bash
# The project's test command (README's second set-up command). It installs what the tests need
# beyond the Rust toolchain, cargo-nextest and Python 3 with pip, then runs every test:
#   - nginx, Debian's package: the fleet tests run three replicas behind a real balancer;
#   - Locust, at the version `plimsoll load --engine locust` is built for, in a virtual
#     environment under target/ (nothing is installed into the system's Python): the load tests
#     run it as a master and two workers.
# What is already there is not installed again.
#
#   bash ci/test.sh [ARGS…]     ARGS go to `cargo nextest run --workspace --locked`
#   bash ci/test.sh --tools     installs the tools and exits (.ci/run does it beside the build)
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/test-tools/venv
locust_version=$(sed -n 's/^pub const LOCUST_VERSION: &str = "\(.*\)";/\1/p' \
  conformance/load/src/locust/mod.rs)

who=ci/test.sh
# shellcheck source=ci/as-root.sh
source ci/as-root.sh

install_nginx() {
  if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
    return
  fi
  echo "ci/test.sh: installing nginx (Debian's package) for the fleet tests" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
}

install_locust() {
  if [ -x "$venv/bin/python" ] &&
    [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("locust"))' 2>/dev/null)" = "$locust_version" ]; then
    return
  fi
  echo "ci/test.sh: installing Locust $locust_version into $venv for the load tests" >&2
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian's python3 keeps venv in a package of its own.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "locust==$locust_version"
}

install_nginx
install_locust
if [ "${1:-}" = --tools ]; then
  exit 0
fi

# The Locust runs use the virtual environment's interpreter.
export PLIMSOLL_PYTHON="$PWD/$venv/bin/python"
exec cargo nextest run --workspace --locked "$@"
