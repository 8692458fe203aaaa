#!/bin/sh
# Runs agent-link for the host plugins: `agent-link mcp` (the MCP server declared in
# .claude-plugin/plugin.json and .codex-plugin/mcp.json) and `agent-link hook <host> <Event>`
# (hooks/hooks.json for Claude Code, hooks/codex-hooks.json for Codex).
#
# Hosts start it with `sh`, so it needs no execute bit. The plugin root comes from the host
# (Claude Code sets CLAUDE_PLUGIN_ROOT; Codex sets PLUGIN_ROOT, and expands ${PLUGIN_ROOT} in
# hook commands, observed on Codex 0.169.0), else from this file's place. The agent-link
# executable is looked for in this order:
#   1. $AGENT_LINK_BIN, when set (an absolute path to an agent-link executable);
#   2. <plugin root>/.venv/bin/agent-link, the environment `make install` creates in a checkout;
#   3. agent-link on PATH (pip or pipx install).
# The MCP server is exec'ed, so it stays a direct child of the host process (the claude harness
# reads its parent's live-session file to follow /clear). A hook never fails: when agent-link
# is missing or crashes, it prints nothing and exits 0, so the prompt goes on.

root=${CLAUDE_PLUGIN_ROOT:-${PLUGIN_ROOT:-$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)}}
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
        # A hook's stderr has no reader when it exits 0; agent-link's own failures are fail-open.
        "$bin" "$@" 2>/dev/null
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
