#!/usr/bin/env bash
# Install the real host CLIs the real-host tests run, each folder from its package-lock.json:
#   hosts/node      Node.js >= 22 from the npm registry's `node` package (Claude Code 2.1.332
#                   declares engines node >= 22; many machines carry an older Node)
#   hosts           the current pins (Codex, Claude Code, opencode)
#   hosts/previous  the previous pins, kept passing by a second real-host run
# opencode-ai names one optional platform package per system; the lock files list each of them
# (npm ci refuses a lock missing one), those of other systems without an integrity hash where
# the registry the locks were made with did not serve them (only this machine's are installed).
# npm itself may run on any Node; the host folders are installed with the registry Node first
# on PATH, so engine checks and install scripts see Node >= 22. One line per step, and npm's
# warnings are shown, not hidden.
set -euo pipefail
# npm's "new version available" notice is about the npm on this machine, not the hosts: not shown
export NPM_CONFIG_UPDATE_NOTIFIER=false
cd "$(dirname "$0")"
NODE_MIN=22
NPM_FLAGS=(--no-audit --no-fund)

major() { "$1" --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }

if ! command -v npm >/dev/null; then
    echo "hosts: npm is not installed; install Node.js with npm (any version: Node >= $NODE_MIN for the hosts comes from the npm registry)" >&2
    exit 1
fi
system_node=$(command -v node || true)
if [ -n "$system_node" ] && [ "$(major "$system_node")" -ge "$NODE_MIN" ] 2>/dev/null; then
    echo "hosts: system Node $("$system_node" --version) meets Claude Code's Node >= $NODE_MIN; the tests still use the pinned registry Node"
else
    echo "hosts: system Node ${system_node:+$("$system_node" --version) }is older than $NODE_MIN, which Claude Code 2.1.332 needs: using Node from the npm registry (hosts/node); install Node >= $NODE_MIN to run \`claude\` yourself"
fi

echo "hosts: Node from the npm registry into hosts/node"
(cd node && npm ci "${NPM_FLAGS[@]}")
node_bin="$PWD/node/node_modules/node/bin"
if [ "$(major "$node_bin/node")" -lt "$NODE_MIN" ] 2>/dev/null || [ ! -x "$node_bin/node" ]; then
    echo "hosts: $node_bin/node is not Node >= $NODE_MIN; check hosts/node/package.json" >&2
    exit 1
fi
export PATH="$node_bin:$PATH"

for folder in . previous; do
    label=$( [ "$folder" = . ] && echo "hosts" || echo "hosts/$folder" )
    versions=$(node -e '
        const l = require(process.argv[1]).packages;
        console.log(["@openai/codex", "@anthropic-ai/claude-code", "opencode-ai"].map(p => p.split("/").pop() + " " + l["node_modules/" + p].version).join(", "));
    ' "$PWD/$folder/package-lock.json")
    echo "hosts: $versions into $label (Node $(node --version))"
    (cd "$folder" && npm ci "${NPM_FLAGS[@]}")
done
