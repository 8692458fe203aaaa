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
# A slow agent-link must not fail a Codex thread either: Codex gives a required server its
# start-up timeout to answer `initialize` and `tools/list`, then fails the thread. So for Codex
# this file answers those two requests itself with what the last healthy agent-link server
# answered under the same `AGENT_LINK_*` values (the server keeps it in
# $XDG_CACHE_HOME/agent-link/launcher/), then execs agent-link and hands it the lines it read
# (AGENT_LINK_MCP_OPENED): the server replays them, drops its own answers to the requests
# answered here, and says on stderr when it came up late. Tool calls made before it is up wait
# for it. An answer file that is not a whole answer (cut short, garbled) is not answered from.
# Without such answers (the first start after an install or an upgrade, or after an
# AGENT_LINK_* change) this file first checks that agent-link starts (`agent-link mcp --check`
# loads what the server loads and exits 0): an agent-link that crashes at start (a module it
# cannot import, a broken upgrade) would fail the thread, so the stand-in answers instead and
# says why; else agent-link is exec'ed and gets the lines read so far, as above.
# (AGENT_LINK_MCP_CHECKED, set by `agent-link install codex` to the executable it checked, skips
# that check; it is never handed on.)

installed_bin=''
bin=
why=
revision=
read_lines=
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

# awk functions reading one JSON-RPC line: a string member, the request id (as written: a
# number or a quoted string; "" for a notification), the method.
json_lib='
function str(name, text,   v) {
    if (!match(text, "\"" name "\"[ \t]*:[ \t]*\"[^\"]*\"")) return ""
    v = substr(text, RSTART, RLENGTH)
    sub(/^"[^"]*"[ \t]*:[ \t]*"/, "", v)
    sub(/"$/, "", v)
    return v
}
function request_id(text,   idpat, at, head, rest, id) {
    idpat = "\"id\"[ \t]*:[ \t]*(\"[^\"]*\"|-?[0-9]+)"
    at = index(text, "\"params\"")
    head = at ? substr(text, 1, at - 1) : text
    id = ""
    if (match(head, idpat)) {
        id = substr(head, RSTART, RLENGTH)
    } else if (at) {  # the id after the params: the last one
        rest = substr(text, at)
        while (match(rest, idpat)) {
            id = substr(rest, RSTART, RLENGTH)
            rest = substr(rest, RSTART + RLENGTH)
        }
    }
    sub(/^"id"[ \t]*:[ \t]*/, "", id)
    return id
}
function method_of(text,   at, m) {
    at = index(text, "\"params\"")
    m = at ? str("method", substr(text, 1, at - 1)) : ""
    return m != "" ? m : str("method", text)
}
'
nl='
'

# One answer: the JSON-RPC envelope around a kept `"result":{...}` (a file without a newline).
answer_from() {
    printf '{"jsonrpc":"2.0","id":%s,' "$1"
    cat "$2" 2>/dev/null || printf '"error":{"code":-32603,"message":"agent-link: %s is gone"}' "$2"
    printf '}\n'
}

# Whether each file named is a whole kept answer: `"result":{...}` on one line with every string,
# brace and bracket closed (a file cut short or garbled would send the client invalid JSON).
whole_answers() {
    awk 'function whole(s,   opened) {
        if (s !~ /^"result"[ \t]*:[ \t]*[{]/ || s !~ /[}]$/) return 0
        gsub(/\\./, "", s)
        gsub(/"[^"]*"/, "", s)
        if (index(s, "\"")) return 0
        opened = gsub(/[{]/, "", s)
        if (opened != gsub(/[}]/, "", s)) return 0
        opened = gsub(/\[/, "", s)
        return opened == gsub(/\]/, "", s)
    }
    BEGIN {
        for (i = 1; i < ARGC; i++) {
            text = ""
            while ((getline part < ARGV[i]) > 0) text = text part
            close(ARGV[i])
            if (!whole(text)) exit 1
        }
        exit 0
    }' "$@" 2>/dev/null
}

# Whether agent-link starts: `agent-link mcp --check` loads what the server loads and exits 0;
# when it does not, `why` says so with the last line it wrote (the error). Codex fails the thread
# when its required server has not answered within its start-up timeout (10 s by default), so a
# check still running after CHECK_S seconds (a database lock held, a hung import) is ended and
# counts as a failure: the stand-in answers in time instead.
CHECK_S=6
starts() {
    said_file="${TMPDIR:-/tmp}/agent-link-check.$$"
    "$1" mcp --check </dev/null >"$said_file" 2>&1 &
    check=$!
    # its output goes nowhere: a sleep left behind must not hold the host's pipe open
    ( sleep "$CHECK_S" && kill -9 "$check" ) </dev/null >/dev/null 2>&1 &
    watchdog=$!
    wait "$check"
    status=$?
    kill "$watchdog" 2>/dev/null
    said=$(awk 'NF { last = $0 } END { print substr(last, 1, 300) }' "$said_file" 2>/dev/null)
    rm -f "$said_file"
    [ "$status" -eq 0 ] && return 0
    if [ "$status" -eq 137 ]; then
        why="agent-link at $1 did not start within $CHECK_S s; run '$1 mcp --check' to see where it stops, fix it, then run 'agent-link install codex' again"
    else
        why="agent-link at $1 failed to start${said:+ ($said)}; run '$1 mcp --check' to see the error, fix or reinstall agent-link, then run 'agent-link install codex' again"
    fi
    return 1
}

# Answers the opening (initialize, then the first page of tools/list) from the kept answers for
# the client's protocol revision, when there are some; every line read is handed on, marked 1
# when it was answered here.
open_from_cache() {
    key=$(env | grep '^AGENT_LINK_' | grep -v -e '^AGENT_LINK_BIN=' -e '^AGENT_LINK_STATE_DIR=' \
          -e '^AGENT_LINK_MAILBOX_PATH=' | LC_ALL=C sort | cksum | tr -c '0-9\n' -)
    cache=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/agent-link/launcher/$key
    AGENT_LINK_MCP_LAUNCHER_CACHE=$cache  # where the server keeps its answers for the next start
    export AGENT_LINK_MCP_LAUNCHER_CACHE
    for known in "$cache"/tools-list-*; do
        [ -f "$known" ] || return 1
        break
    done
    opened=
    revision=
    while :; do
        line=
        if ! IFS= read -r line; then
            if [ -n "$line" ]; then  # the last line, without its newline
                opened=$opened${opened:+$nl}0\ $line
                read_lines=$read_lines${read_lines:+$nl}$line
            fi
            break
        fi
        fields=$(printf '%s\n' "$line" | awk "$json_lib"'{
            v = str("protocolVersion", $0); if (v == "" || v ~ /[^0-9A-Za-z.-]/) v = "-"
            m = method_of($0); if (m == "") m = "-"  # no empty field: a tab IFS would fold it away
            print m "\t" v "\t" (index($0, "\"cursor\"") ? 1 : 0) "\t" request_id($0) }')
        IFS='	' read -r method version cursor id <<FIELDS
$fields
FIELDS
        read_lines=$read_lines${read_lines:+$nl}$line
        if [ -z "$revision" ] && [ "$method" = initialize ] && [ -n "$id" ] && [ "$version" != - ] \
            && whole_answers "$cache/initialize-$version" "$cache/tools-list-$version"; then
            answer_from "$id" "$cache/initialize-$version"
            revision=$version
            opened=$opened${opened:+$nl}1\ $line
        elif [ -n "$revision" ] && [ "$method" = tools/list ] && [ -n "$id" ] && [ "$cursor" = 0 ]; then
            answer_from "$id" "$cache/tools-list-$revision"
            opened=$opened${opened:+$nl}1\ $line
            break
        else
            opened=$opened${opened:+$nl}0\ $line
            # a notification after an answered initialize (notifications/initialized): read on
            [ -n "$revision" ] && [ -z "$id" ] || break
        fi
    done
    AGENT_LINK_MCP_OPENED=$opened
    AGENT_LINK_MCP_OPENED_AT=$(date +%s)
    export AGENT_LINK_MCP_OPENED AGENT_LINK_MCP_OPENED_AT
}

if [ -n "$bin" ]; then
    checked=${AGENT_LINK_MCP_CHECKED:-}
    unset AGENT_LINK_MCP_OPENED AGENT_LINK_MCP_OPENED_AT AGENT_LINK_MCP_LAUNCHER_CACHE AGENT_LINK_MCP_CHECKED
    # only for Codex: Claude Code does not wait for its servers (it starts without their tools)
    if [ "$#" -eq 1 ] && [ "$1" = mcp ] && [ "${AGENT_LINK_HOST:-}" = codex ]; then
        open_from_cache || :
        # nothing answered from kept answers: the thread fails unless agent-link itself answers
        if [ -z "$revision" ] && [ "$checked" != "$bin" ] && ! starts "$bin"; then
            bin=
            unset AGENT_LINK_MCP_OPENED AGENT_LINK_MCP_OPENED_AT AGENT_LINK_MCP_LAUNCHER_CACHE
        fi
    fi
    [ -n "$bin" ] && exec "$bin" "$@"
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
stand_in=$json_lib'
function reply(id, result) {
    printf "{\"jsonrpc\":\"2.0\",\"id\":%s,%s}\n", id, result
    fflush()
}
{
    id = request_id($0)
    if (id == "") next
    method = method_of($0)
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
stand_in_line() {
    printf '%s\n' "$1" | awk -v why="$why" "$stand_in"
}
if [ -n "$read_lines" ]; then  # read before agent-link was found not to start
    while IFS= read -r line; do
        stand_in_line "$line"
    done <<READ
$read_lines
READ
fi
while IFS= read -r line || [ -n "$line" ]; do
    stand_in_line "$line"
done
exit 0
