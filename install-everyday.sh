#!/bin/sh
# Installs agent-link for everyday use: the core and every plugin in plugins/ (the product the
# README describes) as one tool of its own, with uv when it is on PATH, else pipx. Run from
# anywhere; extra arguments go to `uv tool install` / `pipx install` (e.g. --force).
#   ./install-everyday.sh [--pipx | --uv] [--dry-run] [ARGS...]
set -eu
root=$(cd "$(dirname "$0")" && pwd)
tool= dry=
while [ $# -gt 0 ]; do
  case $1 in
    --uv) tool=uv; shift ;;
    --pipx) tool=pipx; shift ;;
    --dry-run) dry=1; shift ;;
    *) break ;;
  esac
done
needs="needs uv (https://docs.astral.sh/uv/) or pipx (https://pipx.pypa.io/) on PATH"
if [ -z "$tool" ]; then
  if command -v uv >/dev/null 2>&1; then tool=uv
  elif command -v pipx >/dev/null 2>&1; then tool=pipx
  elif [ -n "$dry" ]; then  # a dry run still shows what would run: uv's commands, the first choice
    tool=uv
    echo "install-everyday: neither uv nor pipx is on PATH; showing the uv commands (the install $needs)" >&2
  else echo "install-everyday: $needs" >&2; exit 2
  fi
fi
run() {
  echo "+ $*"
  [ -n "$dry" ] || "$@"
}
# the plugin folders are appended to "$@" one by one (paths may hold spaces)
if [ "$tool" = uv ]; then
  set -- tool install "$@" "$root"
  for dir in "$root"/plugins/*/; do
    [ -f "$dir/pyproject.toml" ] && set -- "$@" --with "${dir%/}"
  done
  run uv "$@"
else
  run pipx install "$@" "$root"
  set -- inject agent-link-core
  for dir in "$root"/plugins/*/; do
    [ -f "$dir/pyproject.toml" ] && set -- "$@" "${dir%/}"
  done
  run pipx "$@"
fi
if [ -n "$dry" ]; then echo "install-everyday: dry run, nothing installed"
else echo "install-everyday: done; next: agent-link install claude / agent-link install codex / agent-link install opencode"
fi
