# Shared by the CI scripts that install Debian packages: runs a command as root, directly when
# we are root, through sudo otherwise (sourced; the caller names itself in $who).
as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "${who:-ci}: '$*' needs root (or sudo)" >&2
    return 2
  fi
}
