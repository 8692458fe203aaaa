#!/bin/sh
# Runs agent-link for the Codex plugin: `agent-link mcp` (the MCP server declared in
# .codex-plugin/mcp.json) and `agent-link hook codex <Event>` (hooks/codex-hooks.json).
#
# Codex runs plugin hooks with PLUGIN_ROOT set to the plugin's installed copy (and expands
# ${PLUGIN_ROOT} in the hook command; observed on Codex 0.169.0). The agent-link executable is
# looked for in this order:
#   1. $AGENT_LINK_BIN, when set (an absolute path to an agent-link executable);
#   2. <plugin root>/.venv/bin/agent-link, the environment `make install` creates in a checkout;
#   3. agent-link on PATH (pip or pipx install).
# A hook never fails: when agent-link is missing or crashes it prints nothing and exits 0, so
# the prompt goes on without the note.

root=${PLUGIN_ROOT:-$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)}
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
AGENT_LINK_HOST=${AGENT_LINK_HOST:-codex}
export AGENT_LINK_HOST
exec "$bin" "$@"
