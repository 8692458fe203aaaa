"""Live delivery into a running Claude Code session through its channel.

Claude Code (2.1.197 and 2.1.332) shows a ``notifications/claude/channel`` notification from an MCP server
to the model as a new prompt, but only when every step of its gate passes
(docs/claude-code-hosts.md, docs/hosts/claude-code.md §8): the connection was opened with the ``initialize`` handshake, not the
stateless revision 2026-07-28 (:func:`connection_gate`); the server declared the
``claude/channel`` capability;
the cached feature flag ``tengu_harbor`` is true and none of the variables that switch the flag
cache off is set; the server is listed on the command line (``--channels plugin:<p>@<m>``, with
that plugin on the allowlist ``tengu_harbor_ledger``, or
``--dangerously-load-development-channels plugin:…|server:…`` in an interactive session); and
the session takes prompts after the first (``-p`` needs ``--input-format stream-json``).
Otherwise the notification is dropped silently. So the bridge checks the same facts first
(:func:`evaluate_gate`) and pushes only when they all hold; a message it does not push stays
queued for the hooks and the inbox.

A pushed message is marked delivered (``via="channel"``) only after the notification was
written to the client's stream; a failed write leaves it queued. While its gate is open the
bridge registers itself in ``<state dir>/claude-channels/<pid>.json``, so other agent-link
processes can tell a sender that the target session has live delivery (``queued-channel``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_link_core.json_files import read_json_object
from agent_link_core.mailbox import iso
from agent_link_core.model import EXTERNAL, INVALID, address_scheme, is_address
from agent_link_core.store import ensure_private_dir, now_ms
from agent_link_waits.wakeup import Wakeup

from agent_link_claude.procs import proc_start, same_process

if TYPE_CHECKING:  # pragma: no cover
    import sqlite3

    from agent_link_claude.connection import McpPeer

    from agent_link_core.app import App

log = logging.getLogger(__name__)

#: ``McpPeer.era`` (:mod:`agent_link_claude.connection`): the connection opened with ``initialize`` (MCP revisions up to 2025-11-25)
HANDSHAKE = "handshake"
#: ``McpPeer.era``: the stateless revision 2026-07-28 (``server/discover``, per-request ``_meta``): no path for notifications outside a request
STATELESS = "stateless"


class PeerGone(Exception):
    """The MCP client's connection is closed; nothing was written."""


CAPABILITY = "claude/channel"
METHOD = "notifications/claude/channel"
PLUGIN_NAME = "agent-link"  # .claude-plugin/plugin.json "name"
SERVER_NAME = "agent-link"  # the documented name of a hand-configured server
#: the mcpServers key in both hosts' plugin manifests: the original's key, so that approval
#: settings written for it (Codex config.toml keys, Claude allow rules) keep matching
PLUGIN_SERVER_NAME = "codex-agent-link"
SERVER_NAMES = (SERVER_NAME, PLUGIN_SERVER_NAME)
CLIENT_NAME = "claude-code"  # clientInfo.name Claude Code sends at initialize
# Any of these turns Claude Code's feature-flag cache off, and channels with it (docs/behaviour.md §8).
FLAG_CACHE_OFF = ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DO_NOT_TRACK", "DISABLE_GROWTHBOOK")
CHANNEL_FLAGS = ("--channels", "--dangerously-load-development-channels")
POLL_MIN_S = 0.2
POLL_MAX_S = 2.0
PENDING_SCAN = 1000  # undelivered messages looked at per wake
#: The largest channel event content measured to reach the model whole (Claude Code 2.1.197):
#: 114,190 characters (a 60 KB body full of markup, which escaping doubles). Escaped bodies may
#: grow to 128 KiB; a larger envelope is announced instead and read from the inbox in pages.
CHANNEL_BUDGET_BYTES = 114_000
REGISTRY_DIR = "claude-channels"
# what one pass of ChannelBridge.push_pending did
PUSHED, HELD, FAILED = "pushed", "held", "failed"


@dataclass(frozen=True)
class GateState:
    """Whether Claude Code will show our channel notifications to the model.

    :param open: True only when every checked condition holds.
    :param reason: ``open``, or why it is closed: ``channel_disabled``
        (``AGENT_LINK_DISABLE_CHANNEL``), ``channel_not_declared`` (not inside Claude Code),
        ``connection_not_watched`` (declared, but this plugin does not watch the connection: no capability sent), or
        the first condition that failed (``client_not_connected``,
        ``stateless_protocol_revision``, ``native_inbox`` (the session has an inbox socket, which
        senders push to), ``client_not_claude_code``, ``flag_cache_off:<VAR>``, ``feature_flag_off``, ``print_mode_without_stream_input``,
        ``not_listed``, ``server_not_from_plugin`` (a ``plugin:`` entry names the plugin's server,
        and this one is not it: :func:`served_by_plugin`), ``plugin_server_not_named_by_server_entry``,
        ``server_entry_needs_development_flag``,
        ``development_flag_ignored_in_print_mode``, ``plugin_not_allowlisted``,
        ``no_parent_command_line``).
    :param entry: the command-line entry that lists this server, when one does.
    """

    open: bool
    reason: str
    entry: str | None = None

    def view(self) -> dict[str, Any]:
        return {"open": self.open, "reason": self.reason, "entry": self.entry}


def _flag_value(raw: str | None) -> bool:
    return raw is not None and raw.strip().lower() not in ("", "0", "false", "no", "off")


def channel_entries(argv: Sequence[str]) -> list[tuple[str, str]]:
    """``[(flag, entry)]`` for every entry given to ``--channels`` or the development flag.

    Both flags take several entries (up to the next option) or ``--flag=entry``.
    """
    out: list[tuple[str, str]] = []
    current: str | None = None
    for arg in argv[1:]:
        if arg.startswith("-"):
            current = None
            name, sep, value = arg.partition("=")
            if name in CHANNEL_FLAGS:
                if sep:
                    out.extend((name, v) for v in value.split(",") if v)
                else:
                    current = name
            continue
        if current is not None:
            out.extend((current, v) for v in arg.split(",") if v)
    return out


def _print_mode(argv: Sequence[str]) -> tuple[bool, bool]:
    printing = any(a in ("-p", "--print") for a in argv[1:])
    streaming = "--input-format=stream-json" in argv or any(
        a == "--input-format" and b == "stream-json" for a, b in zip(argv, argv[1:])
    )
    return printing, streaming


# Claude Code exports this to the MCP servers (and hooks) of an installed plugin only:
# <config dir>/plugins/data/<plugin>-<marketplace>.
PLUGIN_DATA_VAR = "CLAUDE_PLUGIN_DATA"


def served_by_plugin(env: Mapping[str, str], plugin: str, marketplace: str) -> bool:
    """Whether this server runs as plugin ``plugin`` from ``marketplace``: Claude Code gave it
    that plugin's data folder (:data:`PLUGIN_DATA_VAR`). The same agent-link configured as a
    plain MCP server has none, and Claude Code drops its channel notifications even when
    ``--channels plugin:…`` names the plugin."""
    data = (env.get(PLUGIN_DATA_VAR) or "").rstrip("/")
    return bool(data) and os.path.basename(data) == f"{plugin}-{marketplace}"


def connection_gate(peer: McpPeer) -> GateState | None:
    """The closed gate when the MCP connection cannot carry a channel notification yet, else None.

    Claude Code registers its channel handler only on a connection opened with the
    ``initialize`` handshake, after its ``notifications/initialized``; on the stateless
    revision (2026-07-28) it refuses channels ("no unsolicited notification path", verified in
    2.1.332). agent-link refuses ``server/discover`` while the channel is wanted, so Claude Code
    falls back to the handshake; ``stateless_protocol_revision`` means a client did not.
    """
    if peer.era == STATELESS:
        return GateState(False, "stateless_protocol_revision")
    if peer.era != HANDSHAKE or not peer.initialized:
        return GateState(False, "client_not_connected")
    return None


def evaluate_gate(
    env: Mapping[str, str], argv: Sequence[str] | None, global_config: Mapping[str, Any], client_name: str | None
) -> GateState:
    """Check Claude Code's channel gate from what this server can see.

    :param env: the server's environment (inherited from the claude process).
    :param argv: the claude process's command line (the server's parent), or None.
    :param global_config: Claude Code's global config (``.claude.json``) as parsed JSON.
    :param client_name: ``clientInfo.name`` from the MCP ``initialize`` request.
    """
    if client_name != CLIENT_NAME:
        return GateState(False, "client_not_claude_code")
    for name in FLAG_CACHE_OFF:
        if _flag_value(env.get(name)):
            return GateState(False, f"flag_cache_off:{name}")
    features = global_config.get("cachedGrowthBookFeatures")
    features = features if isinstance(features, dict) else {}
    if features.get("tengu_harbor") is not True:
        return GateState(False, "feature_flag_off")
    if argv is None:
        return GateState(False, "no_parent_command_line")
    printing, streaming = _print_mode(argv)
    if printing and not streaming:
        return GateState(False, "print_mode_without_stream_input")
    ledger = features.get("tengu_harbor_ledger")
    allowed = {
        (e.get("marketplace"), e.get("plugin")) for e in ledger if isinstance(e, dict)
    } if isinstance(ledger, list) else set()
    failure = "not_listed"
    for flag, entry in channel_entries(argv):
        kind, _, name = entry.partition(":")
        if kind == "plugin":
            plugin, _, marketplace = name.partition("@")
            if plugin != PLUGIN_NAME:
                continue
        elif kind == "server":
            if name not in SERVER_NAMES:
                continue
        else:
            continue
        if flag == "--dangerously-load-development-channels":
            if printing:
                failure = "development_flag_ignored_in_print_mode"
                continue
        elif kind == "server":
            failure = "server_entry_needs_development_flag"
            continue
        elif (marketplace, plugin) not in allowed:
            failure = "plugin_not_allowlisted"
            continue
        # Last: the entry must name this very server, or Claude Code drops its pushes.
        if kind == "plugin" and not served_by_plugin(env, plugin, marketplace):
            failure = "server_not_from_plugin"  # configured some other way than as that plugin
            continue
        if kind == "server" and env.get(PLUGIN_DATA_VAR):  # a plugin's server is plugin:…, never server:…
            failure = "plugin_server_not_named_by_server_entry"
            continue
        return GateState(True, "open", entry)
    return GateState(False, failure)


class GlobalConfigReader:
    """Reads Claude Code's global config, re-parsing only when its mtime or size changes.

    :param path: the ``.claude.json`` file (see :func:`agent_link_claude.sessions.global_config_path`).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._data: dict[str, Any] = {}

    def read(self) -> dict[str, Any]:
        """The parsed object; ``{}`` when missing or malformed."""
        try:
            st = os.stat(self.path)
        except OSError:
            self._stamp, self._data = None, {}
            return self._data
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._stamp, self._data = stamp, read_json_object(self.path) or {}
        return self._data


# -- the registry of running bridges -----------------------------------------------------------


def registry_dir(state_dir: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(state_dir), REGISTRY_DIR)


def register(state_dir: str | os.PathLike[str], session_id: str, gate: GateState) -> None:
    """Record that this process pushes mail for ``session_id`` (atomic write, mode 0600)."""
    directory = registry_dir(state_dir)
    ensure_private_dir(directory)  # 0700 with its parents, whatever the umask
    pid = os.getpid()
    record = {"pid": pid, "procStart": proc_start(pid), "sessionId": session_id, "entry": gate.entry, "since": now_ms()}
    fd, tmp = tempfile.mkstemp(prefix=f".{pid}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(tmp, os.path.join(directory, f"{pid}.json"))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def unregister(state_dir: str | os.PathLike[str]) -> None:
    """Remove this process's registration (missing is fine)."""
    try:
        os.unlink(os.path.join(registry_dir(state_dir), f"{os.getpid()}.json"))
    except FileNotFoundError:
        pass


def active_bridges(state_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``{session id: registration}`` of bridges whose process still runs (pid and start
    time checked, so a reused pid does not count)."""
    out: dict[str, dict[str, Any]] = {}
    directory = registry_dir(state_dir)
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        record = read_json_object(os.path.join(directory, name))
        if record is None:
            continue
        pid, sid = record.get("pid"), record.get("sessionId")
        if isinstance(pid, int) and isinstance(sid, str) and same_process(pid, record.get("procStart")):
            out[sid] = record
    return out


# -- the bridge --------------------------------------------------------------------------------


def channel_meta(row: Mapping[str, Any] | sqlite3.Row) -> dict[str, str]:
    """The notification's ``meta`` (string values; keys match ``[A-Za-z_][A-Za-z0-9_]*``).

    Claude Code renders them as attributes of the ``<channel>`` tag, so the sender is shown
    only as a valid address, ``external`` or ``invalid`` -- never as raw stored text.
    """
    sender = row["from_addr"]
    shown = sender if is_address(sender) or sender == EXTERNAL else INVALID
    verified = json.loads(row["metadata"] or "{}").get("sender", {}).get("verified") is True
    return {
        "message_id": row["id"],
        "from_session_id": shown,
        "from_kind": address_scheme(shown) if is_address(shown) else EXTERNAL,
        "from_verified": "true" if verified and is_address(shown) else "false",
    }


def wants_push(row: Mapping[str, Any] | sqlite3.Row) -> bool:
    """False for messages whose sender asked for mailbox-only delivery."""
    meta = json.loads(row["metadata"] or "{}").get("claude")
    return not (isinstance(meta, dict) and meta.get("push") is False)


@dataclass
class BridgeStatus:
    """What health shows about the bridge of this process.

    ``gate`` is the last gate the bridge acted on; ``probe`` (set while a bridge runs) evaluates
    it afresh, so health never shows a state older than the bridge's next wake.
    """

    running: bool = False
    gate: GateState | None = None
    session_id: str | None = None
    pushed: int = 0
    last_push_ms: int | None = None
    last_error: str | None = None
    probe: Callable[[], GateState] | None = None

    def view(self) -> dict[str, Any]:
        gate = self.probe() if self.probe is not None else self.gate
        return {
            "running": self.running, "gate": gate.view() if gate else None, "sessionId": self.session_id,
            "pushed": self.pushed, "lastPushAt": iso(self.last_push_ms), "lastError": self.last_error,
        }


class ChannelBridge:
    """Pushes a session's new mail as channel notifications while the client is connected.

    :param gate: ``() -> GateState``, evaluated on every wake (cheap; cached reads).
    :param current_session: ``() -> session id | None``, the session this server belongs to
        now (it changes after ``/clear``).
    :param status: where progress is reported for health.

    Wakes on every commit in any process (:class:`agent_link_waits.wakeup.Wakeup`), else after
    0.2 s doubling to 2 s while idle (the fallback). Each turn of the loop costs one ``PRAGMA
    data_version`` (which changes when another process commits) plus the connection's own
    change counter; it reads the mailbox only when either moved.
    """

    def __init__(
        self, gate: Callable[[], GateState], current_session: Callable[[], str | None], status: BridgeStatus
    ) -> None:
        self.gate = gate
        self.current_session = current_session
        self.status = status

    async def run(self, app: App, peer: McpPeer) -> None:
        """Loop until cancelled (connection closed) or the peer is gone (:class:`PeerGone`)."""
        registered: str | None = None
        seen: tuple[Any, ...] | None = None
        held = False
        delay = POLL_MIN_S
        self.status.running, self.status.probe = True, self.gate
        wakeup = Wakeup(app.store.path)  # armed before the first mark: a commit after it wakes the loop
        try:
            while True:
                gate = self.gate()
                session = self.current_session()
                self.status.gate, self.status.session_id = gate, session
                target = session if gate.open else None
                if target != registered:
                    if registered is not None:
                        unregister(app.config.state_dir)
                    if target is not None:
                        register(app.config.state_dir, target, gate)
                    registered = target
                mark = (_data_version(app), app.store.conn.total_changes, target)
                if target is not None and (mark != seen or held):
                    outcome = await self.push_pending(app, peer, target)
                    held = outcome == HELD
                    if outcome != FAILED:
                        seen = (_data_version(app), app.store.conn.total_changes, target)
                    # a wait that holds a message takes it (a write wakes us) or ends without it:
                    # then look again, backing off, until the message is pushed
                    delay = min(delay * 2, POLL_MAX_S) if held and mark == seen else POLL_MIN_S
                else:
                    delay = min(delay * 2, POLL_MAX_S)
                await wakeup.wait(delay)
        finally:
            wakeup.close()
            self.status.running, self.status.probe = False, None
            if registered is not None:
                unregister(app.config.state_dir)

    async def push_pending(self, app: App, peer: McpPeer, session_id: str) -> str:
        """Push every undelivered message for ``claude:<session_id>``, oldest first.

        A message that a running wait is about to return (``wait_for_agent``, ``waitForReply``:
        ``agent_link_held_messages``) is left to that wait, so the model does not get it twice: once as a
        channel turn and once as the tool result.

        :returns: :data:`PUSHED` when nothing is left to push, :data:`HELD` when a message was
            left to a wait (the loop looks again: the wait may end without taking it),
            :data:`FAILED` when a push failed (the rest stays queued; the loop retries later).
        :raises PeerGone: the client's stream is closed.
        """
        address = f"claude:{session_id}"
        outcome = PUSHED
        rows = [row for row in app.mailbox.open_for(address, PENDING_SCAN, undelivered_only=True) if wants_push(row)]
        held = app.hooks.held_messages(address, rows) if rows else set()
        for row in rows:
            if row["id"] in held:
                outcome = HELD
                continue
            fresh = app.mailbox.get_row(row["id"])
            if fresh is None or fresh["first_delivered_at"] is not None:
                continue  # read through the inbox while an earlier push was awaited
            envelope = app.mailbox.envelope(fresh)
            size = len(envelope.encode("utf-8"))
            if size > CHANNEL_BUDGET_BYTES and _announced(app, row["id"]):
                continue  # told once; it waits for the inbox reads
            # a message Claude Code would show cut is announced (agent_link_push_notice); the model reads it in pages
            notice = app.hooks.push_notice(app.mailbox.row_dict(fresh), size, CHANNEL_BUDGET_BYTES) if size > CHANNEL_BUDGET_BYTES else None
            try:
                await peer.notify(METHOD, {"content": envelope if notice is None else notice, "meta": channel_meta(fresh)})
            except PeerGone:
                raise
            except Exception as exc:  # the message stays queued; the loop retries with back-off
                self.status.last_error = f"{type(exc).__name__}: {exc}"[:300]
                log.warning("agent-link: channel push of %s failed: %s", row["id"], exc)
                return FAILED
            if notice is not None:
                app.mailbox.record_event(row["id"], "announced", address, "channel", {"method": METHOD, "bytes": size})
                continue
            app.mailbox.mark_delivered(row["id"], "channel", {"method": METHOD, "session": session_id})
            self.status.pushed += 1
            self.status.last_push_ms = now_ms()
        return outcome


def _announced(app: App, message_id: str) -> bool:
    """Whether an oversized message was already announced (it is never announced twice)."""
    return app.mailbox.has_event(message_id, "announced")


def _data_version(app: App) -> int:
    return int(app.store.conn.execute("PRAGMA data_version").fetchone()[0])
