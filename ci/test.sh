#!/usr/bin/env bash
# The project's test command (README's second set-up command). It installs what the tests need
# beyond the Rust toolchain, cargo-nextest and Python 3 with pip, then builds and runs every test,
# linting as it builds:
#   - the workspace's own crates are compiled by clippy's driver (`clippy --all-targets -D
#     warnings`'s lints, in the one compile that also makes the test binaries: a lint is a build
#     error, and nothing is compiled twice);
#   - nginx, Debian's package: the fleet tests run three replicas behind a real balancer;
#   - Locust, at the version `plimsoll load --engine locust` is built for, in a virtual
#     environment under target/ (nothing is installed into the system's Python): the load tests
#     run it as a master and two workers.
# What is already there is not installed again.
#
#   bash ci/test.sh [ARGS…]     runs the suite's two halves one after the other (nextest profiles
#                               `shared`, then `alone`: .config/nextest.toml); ARGS go to both
#                               `cargo nextest run --workspace --locked` (`--no-run` builds
#                               only; `--profile NAME` runs that profile alone)
#   bash ci/test.sh --tools     installs the tools and exits (.ci/run does it beside the build)
#   bash ci/test.sh --shipped   builds the binary people install (plimsoll without the broken
#                               variants), reusing the test build's crates
#   bash ci/test.sh --list [ARGS…]  lists the tests of that same build (`cargo nextest list
#                               --workspace --locked ARGS`), compiling nothing the runs did not
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

# Clippy's driver compiles the workspace's crates (cargo hands it only those: dependencies are
# compiled by rustc as usual) and fails the build on any warning, rustc's or clippy's: the same
# lints as `cargo clippy --workspace --all-targets -- -D warnings`, since the test build compiles
# every target (libraries, binaries, tests, examples). `CLIPPY_ARGS` is how `cargo clippy` hands
# the driver its arguments; the driver tracks it, so changing it rebuilds.
clippy_driver() {
  command -v rustup >/dev/null && rustup which clippy-driver 2>/dev/null && return
  command -v clippy-driver
}
use_clippy() {
  local driver
  if ! driver=$(clippy_driver); then
    echo "ci/test.sh: clippy is not installed: rustup component add clippy" >&2
    exit 2
  fi
  export RUSTC_WORKSPACE_WRAPPER="$driver"
  export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
}

# A build alone needs none of the tools (.ci/run installs them beside it).
case " $* " in
  *" --no-run "* | *" --list "* | *" --shipped "*) ;;
  *)
    install_nginx
    install_locust
    ;;
esac
if [ "${1:-}" = --tools ]; then
  exit 0
fi
use_clippy

# The binary people install, without the broken variants (`mutants` is on only through
# dev-dependencies), by the same driver as the test build: it then reuses every crate the two
# builds share (only the reference server and the binary differ in their features), and is linted
# like them.
if [ "${1:-}" = --shipped ]; then
  exec cargo build --locked --quiet -p plimsoll --bin plimsoll
fi
if [ "${1:-}" = --list ]; then
  shift
  exec cargo nextest list --workspace --locked "$@"
fi
# The Locust runs use the virtual environment's interpreter.
export PLIMSOLL_PYTHON="$PWD/$venv/bin/python"
case " $* " in
  *" --profile "* | *" --no-run "*) exec cargo nextest run --workspace --locked "$@" ;;
esac
# The whole suite: its two halves one after the other (.config/nextest.toml), the tests that
# share the machine, then those that must have it to themselves; the run fails if either did.
status=0
cargo nextest run --workspace --locked --profile shared "$@" || status=$?
cargo nextest run --workspace --locked --profile alone "$@" || status=$?
exit "$status"
