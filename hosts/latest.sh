#!/usr/bin/env bash
# `make test-latest`: install the newest Codex, Claude Code and opencode the npm registry serves
# today into a scratch folder and run the real-host tests against them (AGENT_LINK_HOSTS_DIR), so a host
# release that breaks agent-link is found in minutes. Needs `make install` first (the venv and
# the registry Node in hosts/node). The folder is $AGENT_LINK_LATEST_DIR if set (kept), else a
# temporary one (removed afterwards). Extra arguments go to pytest.
set -euo pipefail
# npm's "new version available" notice is about the npm on this machine, not the hosts: not shown
export NPM_CONFIG_UPDATE_NOTIFIER=false
repo="$(cd "$(dirname "$0")/.." && pwd)"
node_bin="$repo/hosts/node/node_modules/node/bin"
if [ ! -x "$node_bin/node" ] || [ ! -x "$repo/.venv/bin/python" ]; then
    echo "test-latest: run \`make install\` first (it installs the venv and Node from the npm registry)" >&2
    exit 1
fi
export PATH="$node_bin:$PATH"
if [ -n "${AGENT_LINK_LATEST_DIR:-}" ]; then
    dir="$AGENT_LINK_LATEST_DIR"
    mkdir -p "$dir"
else
    dir="$(mktemp -d "${TMPDIR:-/tmp}/agent-link-latest.XXXXXX")"
    trap 'rm -rf "$dir"' EXIT
fi
cat > "$dir/package.json" <<'EOF'
{"name": "agent-link-latest-hosts", "private": true,
 "allowScripts": {"@anthropic-ai/claude-code": true, "opencode-ai": true}}
EOF
codex=$(npm view @openai/codex version)
claude=$(npm view @anthropic-ai/claude-code version)
opencode=$(npm view opencode-ai version)
echo "test-latest: codex $codex, claude-code $claude, opencode-ai $opencode (the registry's newest) into $dir (Node $(node --version))"
(cd "$dir" && npm install --no-audit --no-fund --save-exact "@openai/codex@$codex" "@anthropic-ai/claude-code@$claude" "opencode-ai@$opencode")
echo "test-latest: real-host tests against them"
cd "$repo"
AGENT_LINK_HOSTS_DIR="$dir" .venv/bin/python -m pytest -q -m realhost "$@"
