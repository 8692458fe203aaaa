#!/bin/sh
# Runs agent-link for a host plugin: `agent-link mcp` (the MCP server the plugin's manifest
# declares) and `agent-link hook <host> <Event>` (the plugin's hook declarations).
#
# Hosts start it with `sh`, so it needs no execute bit. The plugin folder holds only manifests,
# hook declarations and this file; agent-link itself is installed elsewhere and looked for in
# this order:
#   1. $AGENT_LINK_BIN, when set (an absolute path to an agent-link executable);
#   2. the executable `agent-link install <host>` wrote into the line below when it copied
#      this folder (empty in the repository's copy);
#   3. agent-link on PATH (pipx, `uv tool install`, an activated virtualenv).
# The MCP server is exec'ed, so it stays a direct child of the host process (a harness may read
# its parent's files to follow the session). A hook never fails: when agent-link is missing or
# crashes, it prints nothing and exits 0, so the prompt goes on.

installed_bin=''
bin=
for candidate in "${AGENT_LINK_BIN:-}" "$installed_bin"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
        bin=$candidate
        break
    fi
done
if [ -z "$bin" ] && command -v agent-link >/dev/null 2>&1; then
    bin=$(command -v agent-link)
fi

if [ "${1:-}" = hook ]; then
    if [ -n "$bin" ]; then
        # A hook's stderr has no reader when it exits 0; agent-link's own failures are fail-open.
        "$bin" "$@" 2>/dev/null
    else
        cat >/dev/null
    fi
    exit 0
fi

if [ -z "$bin" ]; then
    echo "agent-link: executable not found (set AGENT_LINK_BIN, put agent-link on PATH, or run 'agent-link install <host>' again)" >&2
    exit 127
fi
exec "$bin" "$@"
