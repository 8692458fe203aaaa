#!/bin/sh
# Runs agent-link for the Claude Code plugin: `agent-link mcp` (the MCP server declared in
# .claude-plugin/plugin.json) and `agent-link hook claude <Event>` (hooks/hooks.json).
#
# Claude Code starts this with `sh`, so it needs no execute bit. It looks for the agent-link
# executable in this order:
#   1. $AGENT_LINK_BIN, when set (an absolute path to an agent-link executable);
#   2. <plugin root>/.venv/bin/agent-link, the environment `make install` creates in a checkout;
#   3. agent-link on PATH (pip or pipx install).
# The MCP server is exec'ed, so it stays a direct child of the claude process (the claude
# harness reads its parent's live-session file to follow /clear). A hook never fails: when
# agent-link is missing or crashes, it prints nothing and exits 0, so the prompt goes on.

root=${CLAUDE_PLUGIN_ROOT:-$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)}
bin=
for candidate in "${AGENT_LINK_BIN:-}" "$root/.venv/bin/agent-link"; do
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
        "$bin" "$@"
    else
        cat >/dev/null
    fi
    exit 0
fi

if [ -z "$bin" ]; then
    echo "agent-link: executable not found (set AGENT_LINK_BIN, run 'make install' in $root, or put agent-link on PATH)" >&2
    exit 127
fi
exec "$bin" "$@"
