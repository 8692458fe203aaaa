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
# A candidate counts when it is executable and, for a script, its `#!` interpreter is too (a
# deleted or moved virtualenv leaves a script whose Python is gone).
# The MCP server is exec'ed, so it stays a direct child of the host process (a harness may read
# its parent's files to follow the session). A hook never fails: when agent-link is missing or
# crashes, it prints nothing and exits 0, so the prompt goes on.
#
# agent-link never keeps the host from starting: Codex waits for the server (it is declared
# required, so its tools are in the first turn of every thread) and fails the thread when it does
# not start. When no usable agent-link is found, this file answers the MCP opening itself with no
# tools (awk, POSIX), says why on stderr (the host's MCP log) and in the server's `instructions`,
# and the session runs without agent-link.

installed_bin=''
bin=
why=
usable() {
    [ -n "$1" ] && [ -f "$1" ] && [ -x "$1" ] || return 1
    first=
    IFS= read -r first <"$1" 2>/dev/null || :
    case $first in
        '#!'*)
            interpreter=${first#??}
            interpreter=${interpreter#"${interpreter%%[! 	]*}"}
            interpreter=${interpreter%%[ 	]*}
            if [ ! -x "$interpreter" ]; then
                why="agent-link at $1 cannot run: its interpreter $interpreter is missing (reinstall agent-link, then run 'agent-link install <host>' again)"
                return 1
            fi
            ;;
    esac
    return 0
}
for candidate in "${AGENT_LINK_BIN:-}" "$installed_bin"; do
    if usable "$candidate"; then
        bin=$candidate
        break
    fi
done
if [ -z "$bin" ] && command -v agent-link >/dev/null 2>&1 && usable "$(command -v agent-link)"; then
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

if [ -n "$bin" ]; then
    exec "$bin" "$@"
fi
if [ "${1:-}" != mcp ]; then
    echo "agent-link: ${why:-executable not found (set AGENT_LINK_BIN, put agent-link on PATH, or run 'agent-link install <host>' again)}" >&2
    exit 127
fi
why=${why:-"agent-link executable not found (set AGENT_LINK_BIN, put agent-link on PATH, or run 'agent-link install <host>' again)"}
echo "agent-link: $why; this session runs without agent-link's tools" >&2
why=$(printf '%s' "agent-link is unavailable in this session: $why" | tr -d '"\\' | tr '\t\r\n' '   ')
# The stand-in MCP server: one JSON-RPC request per line; answers the opening with no tools,
# anything else with "method not found"; notifications get no answer. The shell reads the lines
# (one awk per line): awk may wait to fill a buffer from a pipe (mawk does) before it answers.
stand_in='
function str(name, text,   v) {
    if (!match(text, "\"" name "\"[ \t]*:[ \t]*\"[^\"]*\"")) return ""
    v = substr(text, RSTART, RLENGTH)
    sub(/^"[^"]*"[ \t]*:[ \t]*"/, "", v)
    sub(/"$/, "", v)
    return v
}
function reply(id, result) {
    printf "{\"jsonrpc\":\"2.0\",\"id\":%s,%s}\n", id, result
    fflush()
}
{
    idpat = "\"id\"[ \t]*:[ \t]*(\"[^\"]*\"|-?[0-9]+)"
    at = index($0, "\"params\"")
    head = at ? substr($0, 1, at - 1) : $0
    id = ""
    if (match(head, idpat)) {
        id = substr(head, RSTART, RLENGTH)
    } else if (at) {  # the id after the params: the last one
        rest = substr($0, at)
        while (match(rest, idpat)) {
            id = substr(rest, RSTART, RLENGTH)
            rest = substr(rest, RSTART + RLENGTH)
        }
    }
    if (id == "") next
    sub(/^"id"[ \t]*:[ \t]*/, "", id)
    method = str("method", head != $0 ? head : $0)
    if (method == "") method = str("method", $0)
    if (method == "initialize") {
        version = str("protocolVersion", $0)
        if (version == "") version = "2025-06-18"
        reply(id, "\"result\":{\"protocolVersion\":\"" version "\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"agent-link\",\"version\":\"unavailable\"},\"instructions\":\"" why "\"}")
    } else if (method == "tools/list") {
        reply(id, "\"result\":{\"tools\":[]}")
    } else if (method == "ping") {
        reply(id, "\"result\":{}")
    } else {
        reply(id, "\"error\":{\"code\":-32601,\"message\":\"" why "\"}")
    }
}'
while IFS= read -r line || [ -n "$line" ]; do
    printf '%s\n' "$line" | awk -v why="$why" "$stand_in"
done
exit 0
