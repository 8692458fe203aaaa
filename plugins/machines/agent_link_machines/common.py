"""What the plugin's parts share: its settings, this machine's name, the files under
``<state>/machines/`` and the routing decision. Standard library and the core only: the
hooks that use it run in every agent-link process.

Files (written only by the relay, ``agent-link machines run``; read by every process):

* ``directory.json``: ``{"at": ms, "machines": {name: {"at": ms, "heartbeatMs": ms, "instance": str,
  "sessions": [session view, ...], "served": [address, ...], "roles": {role name: [holder,
  ...]}, "procedures": {role name: {"version", "sha256"}} | None}}}``, the other machines'
  listings as the relay last read them from the engine;
* ``status.json``: ``{"at": ms, "heartbeatMs": ms, "engine": url without credentials,
  "reachable": bool, "lastContactMs": ms|None, "error": str|None, "machine": name,
  "stopped": bool, "settings": digest}`` (``stopped``: the relay exited, ``error`` then says why when it was an
  error); a directory entry carries its writer's ``heartbeatMs`` too, so every reader judges
  its age by the writer's beat (:func:`written_stale_ms`);
* ``instance``: a random id naming this state dir, which claims the machine name;
* ``outbox-waiters/``: the relay's wake-up FIFO (:func:`outbox_signal`);
* ``relay.lock``: held (``flock``) by the running relay.
"""

from __future__ import annotations

import functools
import os

from agent_link_core.config import Setting
from agent_link_core.json_files import read_json_object
from agent_link_core.store import now_ms

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    from pathlib import Path

NAME = "machines"
URL_SETTING = "AGENT_LINK_ENGINE_URL"
CREDS_SETTING = "AGENT_LINK_ENGINE_CREDS"
MACHINE_SETTING = "AGENT_LINK_MACHINE"
HEARTBEAT_SETTING = "AGENT_LINK_MACHINES_HEARTBEAT_MS"
AUTOSTART_SETTING = "AGENT_LINK_MACHINES_AUTOSTART"
DEFAULT_HEARTBEAT_MS = 5000
#: a machine whose listing is older than this many heartbeats is shown as stale
STALE_HEARTBEATS = 3

SETTINGS = (
    Setting(URL_SETTING, "str", None,
            doc="the NATS JetStream server every machine shares, nats://[user:password@|token@]host:4222 (comma-separated for a cluster)"),
    Setting(CREDS_SETTING, "path", None, doc="a NATS credentials file (.creds: JWT and NKey seed) for the engine"),
    Setting(MACHINE_SETTING, "str", None, doc="this machine's name among the machines (default: the host name's first label)"),
    Setting(HEARTBEAT_SETTING, "int", DEFAULT_HEARTBEAT_MS, minimum=100, maximum=600_000, warning="machines_heartbeat_ignored",
            doc="how often the relay publishes this machine's sessions, ms; a listing 3 beats old is stale"),
    Setting(AUTOSTART_SETTING, "flag", True,
            doc="MCP servers start this machine's relay when none runs (off: run `agent-link machines run` yourself)"),
)

#: the characters of a machine name: a NATS subject token and a KV key part
MACHINE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def is_machine_name(name: object) -> bool:
    """Whether ``name`` is a machine name: a str of 1-64 of ``A-Z a-z 0-9 _ -`` (checked without :mod:`re`: a first
    command in a new state dir imports this module for the plugin's migrations)."""
    return isinstance(name, str) and 0 < len(name) <= 64 and set(name) <= MACHINE_CHARS

# JetStream names (docs: README.md "How it is stored")
STREAM = "AGENT_LINK_MAIL"
SUBJECT_PREFIX = "agent_link.mail."
BUCKET = "agent_link_machines"


def mail_subject(to: str, origin: str) -> str:
    """The subject of mail from machine ``origin`` to machine ``to``:
    ``agent_link.mail.<to>.<origin>``. A machine's NATS user may publish only with its own
    name last (:mod:`agent_link_machines.permissions`), so the receiving relay knows which
    machine published a record whatever the record says."""
    return f"{SUBJECT_PREFIX}{to}.{origin}"


def legacy_subject(to: str) -> str:
    """The subject mail to machine ``to`` had in plugin versions before :func:`mail_subject`
    named the publisher: ``agent_link.mail.<to>``. An upgraded relay still reads what is left
    there, or still comes from machines not yet upgraded (:meth:`agent_link_machines.relay.Relay.inbound_loop`)."""
    return f"{SUBJECT_PREFIX}{to}"


def mail_durable(machine: str) -> str:
    """The durable consumer of the mail stream that machine ``machine`` reads its mail with,
    filtered to ``mail_subject(machine, "*")``: ``machine_<machine>``."""
    return f"machine_{machine}"


def legacy_durable(machine: str) -> str:
    """The durable consumer reading ``legacy_subject(machine)`` on a machine that never ran an
    earlier version: ``oldmail_<machine>``."""
    return f"oldmail_{machine}"


def upgraded_durable(machine: str) -> str:
    """The durable consumer of ``mail_subject(machine, "*")`` on a machine upgraded from an
    earlier version, whose :func:`mail_durable` reads ``legacy_subject(machine)`` and goes on
    doing so: ``mail_<machine>``. (Consumer names of different machines never clash: the
    prefixes ``machine_``, ``mail_`` and ``oldmail_`` differ before a name starts.)"""
    return f"mail_{machine}"


def machine_name(config: Any) -> str:
    """This machine's name: ``AGENT_LINK_MACHINE``, else the host name's first label with
    characters a name cannot hold replaced by ``-``.

    :raises ValueError: when ``AGENT_LINK_MACHINE`` is not 1-64 of ``A-Z a-z 0-9 _ -``.
    """
    return _checked_name(config.get(MACHINE_SETTING) or None)


@functools.lru_cache(maxsize=8)
def _checked_name(explicit: str | None) -> str:
    """:func:`machine_name` of one ``AGENT_LINK_MACHINE`` value (None: the host name), kept:
    every send of a process with the engine configured asks it up to three times."""
    if explicit:
        if not is_machine_name(explicit):
            raise ValueError(f"{MACHINE_SETTING}={explicit!r} is not a machine name (1-64 of A-Z a-z 0-9 _ -)")
        return str(explicit)
    import socket  # every process loads this module; only a machine's name needs it

    host = socket.gethostname().split(".", 1)[0] or "machine"
    return "".join(c if c in MACHINE_CHARS else "-" for c in host)[:64]


def plugin_dir(config: Any) -> Path:
    """``<state dir>/machines``."""
    from pathlib import Path

    return Path(config.state_dir) / NAME


def outbox_signal(config: Any) -> str:
    """The path whose wake-up FIFOs (:mod:`agent_link_core.wake`, folder ``<path>-waiters``)
    the relay's outbox loop waits on: a process that wrote the outbox pokes them after its
    commit, so the relay wakes for mail to another machine only, not for every local commit."""
    return os.path.join(config.state_dir, NAME, "outbox")


def heartbeat_ms(config: Any) -> int:
    """``AGENT_LINK_MACHINES_HEARTBEAT_MS`` (ms)."""
    return int(config.get(HEARTBEAT_SETTING) or DEFAULT_HEARTBEAT_MS)


#: the URL schemes nats-py takes
SCHEMES = ("nats", "tls", "ws", "wss")


def _url_parts(server: str) -> tuple[str | None, str | None, str]:
    """``(scheme or None, user info or None, host[:port])`` of one server URL, without
    ``urllib`` (which raises on a bad port or bracket): the user info ends at the *last* ``@``,
    so a password holding ``/`` or ``@`` never lands in the host part shown in errors."""
    import re

    scheme, rest = re.match(r"^(?:([^:/?#@]*)://)?(.*)$", server.strip(), re.S).groups()  # type: ignore[union-attr]  # it matches every string
    userinfo, at, hostpart = rest.rpartition("@")
    hostport = re.split(r"[/?#]", hostpart, maxsplit=1)[0]
    return scheme, (userinfo if at else None), hostport


def redact(url: str | None) -> str | None:
    """The engine URL(s) without user, password or token, for health and errors; never
    raises, whatever the text (a URL that is not one is shown as far as it goes)."""
    if not url:
        return url
    shown = []
    for part in url.split(","):
        scheme, _, hostport = _url_parts(part)
        shown.append(f"{scheme}://{hostport}" if scheme is not None else hostport)
    return ",".join(shown)


def url_user(url: str | None) -> str | None:
    """The user name the first server URL of ``url`` gives (``nats://user:password@...``),
    None for none or a token alone: errors may name it, never the password or token."""
    if not url:
        return None
    userinfo = _url_parts(url.split(",")[0])[1]
    if not userinfo or ":" not in userinfo:
        return None
    import urllib.parse

    return urllib.parse.unquote(userinfo.partition(":")[0]) or None


def url_problem(server: str) -> str | None:
    """What is wrong with one server URL of ``AGENT_LINK_ENGINE_URL`` (a few words), or None
    when it is ``nats|tls|ws|wss://[user:password@|token@]host[:port]``. Never shows the
    user info."""
    scheme, _, hostport = _url_parts(server)
    if scheme is None or scheme.lower() not in SCHEMES:
        return "the scheme must be nats://, tls://, ws:// or wss://"
    if hostport.startswith("["):
        host, closed, after = hostport[1:].partition("]")
        if not closed:
            return "the [ of its IPv6 host is not closed"
        if after and not after.startswith(":"):
            return "text after its IPv6 host's ]"
        port = after[1:] if after else None
    else:
        if hostport.count(":") > 1:
            return "an IPv6 host must be written in [ ]"
        host, colon, port_text = hostport.partition(":")
        port = port_text if colon else None
    if not host:
        return "it names no host"
    if port is not None:
        if not port.isdigit():
            return "its port is not a number"
        if not 1 <= int(port) <= 65535:
            return f"its port {int(port)} is not in 1-65535"
    return None


def check_url(url: str | None) -> list[str]:
    """The server URLs of ``AGENT_LINK_ENGINE_URL`` (comma-separated).

    :raises ValueError: unset, or an entry :func:`url_problem` finds wrong; one line naming
        the setting and what is wrong, without credentials.
    """
    if not url or not url.strip():
        raise ValueError(f"{URL_SETTING} is not set: point it at the NATS server, e.g. nats://user:password@host:4222.")
    servers = [u.strip() for u in url.split(",") if u.strip()]
    if not servers:
        raise ValueError(f"{URL_SETTING}={url!r} names no server (nats://[user:password@]host:4222).")
    for server in servers:
        problem = url_problem(server)
        if problem is not None:
            raise ValueError(f"{URL_SETTING}={redact(server)!r} is not a NATS URL: {problem} (nats://[user:password@]host:4222).")
    return servers


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically (readers never see half a file), 0600 in a 0700 folder."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    import json

    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    os.replace(tmp, path)


def cancel_until_done(task: Any, every_s: float = 1.0) -> None:
    """Cancel ``task`` (an ``asyncio.Task``) now and again every ``every_s`` seconds until it
    ends. nats-py and Python 3.11's ``asyncio.wait_for`` can swallow a cancellation that lands
    just as the result they awaited arrives: the relay then ran on after its SIGTERM."""
    if not task.done():
        task.cancel()
        task.get_loop().call_later(every_s, cancel_until_done, task, every_s)


# (path, mtime ns, size) -> parsed directory.json: every send of a long-lived process asks
# it, and the relay rewrites it only once a heartbeat
_directory_cache: tuple[tuple[str, int, int], dict[str, Any] | None] | None = None
#: machine_of's index of one parsed directory: (that directory object, AGENT_LINK_MACHINE as
#: set, {address: machine}, {address: [machine, ...]} of the addresses several list); the name
#: is checked only when the index is built
_where_cache: tuple[dict[str, Any], Any, dict[str, str], dict[str, list[str]]] | None = None
#: {state dir: its directory.json path}
_directory_paths: dict[str, str] = {}


def read_directory(config: Any) -> dict[str, Any] | None:
    """``directory.json``, or None when the relay never wrote one (parsed again only when the
    file changed)."""
    global _directory_cache
    # a string path, not plugin_dir(), made once per state dir: this runs on every send of every process
    state = config.state_dir
    path = _directory_paths.get(state)
    if path is None:
        path = _directory_paths[state] = os.path.join(state, NAME, "directory.json")
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_mtime_ns, st.st_size)
    if _directory_cache is not None and _directory_cache[0] == key:
        return _directory_cache[1]
    found = read_json_object(path)
    _directory_cache = (key, found)
    return found


def read_status(config: Any) -> dict[str, Any] | None:
    """``status.json``, or None when the relay never wrote one."""
    return read_json_object(plugin_dir(config) / "status.json")


def stale_after_ms(config: Any) -> int:
    """Age (ms) beyond which a listing or status written with this process's heartbeat
    setting is stale (what a writer that does not say its own heartbeat is judged by)."""
    return STALE_HEARTBEATS * heartbeat_ms(config)


def written_stale_ms(written: Any, config: Any) -> int:
    """Age (ms) beyond which ``written`` (a directory entry or ``status.json``) is stale:
    :data:`STALE_HEARTBEATS` of the heartbeat its writer says it beats at (``heartbeatMs``),
    so machines and processes with different settings judge it alike; this process's
    setting when it says none (written by an earlier version) or an impossible one."""
    beat = written.get("heartbeatMs") if isinstance(written, dict) else None
    if isinstance(beat, int) and not isinstance(beat, bool) and 100 <= beat <= 600_000:
        return STALE_HEARTBEATS * beat
    return stale_after_ms(config)


def listing_stale(entry: Any, config: Any) -> tuple[bool, int | None]:
    """``(stale, age ms or None)`` of another machine's directory entry (:func:`written_stale_ms`)."""
    age = age_ms(entry.get("at")) if isinstance(entry, dict) else None
    return age is None or age > written_stale_ms(entry, config), age


def settings_key(config: Any) -> str:
    """A digest of the settings a relay's error can be about (URL, creds file, machine name),
    written with ``status.json``: an error recorded under other settings is one the person
    already fixed, which health no longer shows."""
    import hashlib

    text = "\n".join(str(config.get(k) or "") for k in (URL_SETTING, CREDS_SETTING, MACHINE_SETTING))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def relay_alive(status: dict[str, Any] | None, config: Any) -> bool:
    """Whether ``status.json`` says a relay runs: written within :func:`written_stale_ms` and
    not marked ``stopped`` (which a relay writes as it exits)."""
    if not status or status.get("stopped"):
        return False
    age = age_ms(status.get("at"))
    return age is not None and age <= written_stale_ms(status, config)


def machine_of(config: Any, address: str) -> str | None:
    """The other machine whose listing holds ``address`` (a session or a served plain address),
    or None when no other machine lists it. When several do (the same plain address served on
    two machines), the one where its session was active last (the listing's
    ``lastActivityMs`` of it; a served address with no live session counts as never active),
    then the first name: the choice stays put from one heartbeat to the next.
    Reads ``directory.json``: no network (an index built once per change of the file, so a
    send costs one ``stat`` however many sessions the machines list)."""
    return remote_addresses(config).get(address)


def remote_addresses(config: Any) -> dict[str, str]:
    """``{address: machine}`` of every address another machine lists, as :func:`machine_of`
    decides each; ``{}`` without a directory. The index is shared: do not change it."""
    return _where(config)[0]


def shared_addresses(config: Any) -> dict[str, list[str]]:
    """``{address: [machine, ...]}`` (sorted) of the addresses several other machines list;
    ``{}`` when none does. The index is shared: do not change it."""
    return _where(config)[1]


_NOWHERE: tuple[dict[str, str], dict[str, list[str]]] = ({}, {})


def _where(config: Any) -> tuple[dict[str, str], dict[str, list[str]]]:
    global _where_cache
    directory = read_directory(config)
    if not directory:
        return _NOWHERE
    setting = config.get(MACHINE_SETTING)
    if _where_cache is not None and _where_cache[0] is directory and _where_cache[1] == setting:
        return _where_cache[2], _where_cache[3]
    try:
        own = machine_name(config)
    except ValueError:
        return _NOWHERE
    best: dict[str, tuple[int, str]] = {}
    listed_by: dict[str, list[str]] = {}
    for name, entry in sorted((directory.get("machines") or {}).items(), reverse=True):  # ties: the first name
        if name == own or not isinstance(entry, dict):
            continue
        active: dict[str, int] = {a: 0 for a in entry.get("served") or () if isinstance(a, str)}
        for view in entry.get("sessions") or ():
            if isinstance(view, dict) and isinstance(view.get("address"), str):
                last = view.get("lastActivityMs")
                active[view["address"]] = max(active.get(view["address"], 0), last if isinstance(last, int) else 0)
        for address, last in active.items():
            listed_by.setdefault(address, []).append(name)
            if address not in best or best[address][0] <= last:
                best[address] = (last, name)
    _where_cache = (directory, setting, {a: m for a, (_, m) in best.items()},
                    {a: sorted(names) for a, names in listed_by.items() if len(names) > 1})
    return _where_cache[2], _where_cache[3]


#: {database path: plain addresses a process served there}: a presence row, once written, stays
#: (agent_link_presence.table.seen: "has ever served"), so a positive answer is kept and every
#: later send to that address skips the query
_served_cache: dict[str, set[str]] = {}
SERVED_CACHE_MAX = 4096


def served_here(conn: Any, config: Any, address: str) -> bool:
    """Whether a process of this machine ever served ``address`` (its presence row), read
    through ``conn`` (inside a write transaction too); a yes is kept for the process's life
    (at most :data:`SERVED_CACHE_MAX` addresses per database)."""
    known = _served_cache.setdefault(config.db_path, set())
    if address in known:
        return True
    from agent_link_presence.table import served_row

    if served_row(conn, address) is None:
        return False
    if len(known) < SERVED_CACHE_MAX:
        known.add(address)
    return True


def listed_session(config: Any, address: str) -> tuple[str, dict[str, Any]] | None:
    """``(machine, session view)`` of the other machine whose listing holds the session
    ``address`` (the newest listing when several do), the view marked with ``machine``,
    ``machineStale`` and ``machineAgeMs`` as the ``machines`` harness lists it; None when no
    other machine lists such a session. Reads ``directory.json``: no network."""
    machine = machine_of(config, address)
    entry = ((read_directory(config) or {}).get("machines") or {}).get(machine) if machine else None
    if machine is None or not isinstance(entry, dict):
        return None
    view = next((s for s in entry.get("sessions") or () if isinstance(s, dict) and s.get("address") == address), None)
    if view is None:
        return None
    stale, age = listing_stale(entry, config)
    shown = {k: v for k, v in view.items() if k != "lastActivityMs"}
    return machine, {**shown, "machine": machine, "machineStale": stale, "machineAgeMs": age}


def age_ms(at: Any) -> int | None:
    """Milliseconds since ``at`` (epoch ms), or None."""
    return now_ms() - int(at) if isinstance(at, int) else None


#: the roles plugin's entry-point name (its public API, agent_link_roles.api, says who holds a role here)
ROLES_PLUGIN = "roles"


def _roles_api(app: Any) -> Any:
    """``agent_link_roles.api`` when the roles plugin is installed and loaded here, else None."""
    if ROLES_PLUGIN not in app.hooks.loaded:
        return None
    try:
        from agent_link_roles import api  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    return api


def local_roles(app: Any) -> dict[str, list[str]]:
    """``{role name: [holder, ...]}`` as this machine's roles plugin resolves ``role:<name>``
    (``agent_link_roles.api.role_holders``); ``{}`` when that plugin is not loaded here or its
    table cannot be read (health and the role tools say so; no role is published meanwhile)."""
    from agent_link_core.errors import AgentLinkError

    api = _roles_api(app)
    try:
        return dict(api.role_holders(app)) if api is not None else {}
    except AgentLinkError:
        return {}


def local_enforcement(app: Any) -> str | None:
    """This machine's role enforcement mode (``agent_link_roles.api.enforcement``), published
    with :func:`local_roles` so another machine applies it to its direct mail to a role holder
    here (:func:`role_rules`); None when the roles plugin is not loaded here."""
    mode = getattr(_roles_api(app), "enforcement", None)  # a roles plugin older than this API publishes none
    return str(mode(app)) if mode is not None else None


def local_procedures(app: Any) -> dict[str, dict[str, Any]] | None:
    """``{role name: {"version", "sha256"}}`` of this machine's role procedures
    (``agent_link_roles.api.procedure_versions``), published with :func:`local_roles` so
    another machine can show that its copy of a procedure differs (:func:`procedure_mismatches`);
    None when the roles plugin is not loaded here, is older than that API, or its table
    cannot be read."""
    from agent_link_core.errors import AgentLinkError

    if ROLES_PLUGIN not in app.hooks.loaded:
        return None
    try:
        from agent_link_roles import api  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    versions = getattr(api, "procedure_versions", None)
    if versions is None:
        return None
    try:
        return dict(versions(app))
    except AgentLinkError:
        return None


def procedure_mismatches(app: Any, directory: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The role procedures another machine publishes with other content than this machine's
    (:func:`local_procedures`), sorted by role and machine: ``[{"role", "machine", "there":
    {"version", "sha256"}, "here": {"version", "sha256"}}]``. A role with a procedure on one
    side only is not one (nothing to compare); a machine that publishes no procedures (an
    earlier plugin version, or no roles plugin there) neither. ``[]`` without the roles
    plugin here."""
    here = local_procedures(app)
    if not here or not directory:
        return []
    try:
        own = machine_name(app.config)
    except ValueError:
        own = None
    out = []
    for machine, entry in sorted((directory.get("machines") or {}).items()):
        theirs = entry.get("procedures") if isinstance(entry, dict) and machine != own else None
        if not isinstance(theirs, dict):
            continue
        for role, mine in sorted(here.items()):
            there = theirs.get(role)
            if isinstance(there, dict) and there.get("sha256") != mine.get("sha256"):
                out.append({"role": role, "machine": machine, "there": {"version": there.get("version"), "sha256": there.get("sha256")},
                            "here": dict(mine)})
    return out


#: metadata key of the rules a direct message to another machine's role holder carries
#: (``agent_link_roles.api.REMOTE_RULES_KEY``; not imported: the roles plugin may be absent)
ROLE_RULES_KEY = "roleRules"


def role_rules(config: Any, machine: str, address: str) -> dict[str, Any] | None:
    """``{"machine", "enforcement", "roles"}``: the role rules ``machine`` publishes for a direct
    message to its session ``address`` (its entry's ``roleEnforcement`` and the roles
    ``address`` holds there), which the roles plugin of this machine applies at send time;
    None when that machine enforces nothing (``off``, or no roles plugin there) or
    ``address`` holds no role there. Reads ``directory.json``: no network."""
    entry = ((read_directory(config) or {}).get("machines") or {}).get(machine)
    if not isinstance(entry, dict) or entry.get("roleEnforcement") not in ("warn", "enforce") or not isinstance(entry.get("roles"), dict):
        return None
    held = sorted(str(name) for name, holders in entry["roles"].items() if isinstance(holders, list) and address in holders)
    return {"machine": machine, "enforcement": entry["roleEnforcement"], "roles": held} if held else None


def attach_role_procedure(app: Any, metadata: dict[str, Any]) -> None:
    """Before a role-addressed message that arrived from another machine is stored here: this
    machine's roles plugin replaces the sending machine's procedure reference with its own
    (``agent_link_roles.api.attach_arrived_procedure``), so the holder sees the procedure its
    own machine keeps. Nothing happens when the roles plugin is not loaded here (then nothing
    here renders a procedure either).

    :param metadata: the message's metadata, changed in place.
    :raises AgentLinkError: from the roles plugin when the version cannot be recorded (the
        record is then not applied and comes again).
    """
    if not isinstance(metadata.get("role"), dict):
        return
    attach = getattr(_roles_api(app), "attach_arrived_procedure", None)
    if attach is not None:  # a roles plugin older than this API keeps the sender's reference
        attach(app, metadata)


def roles_of_others(config: Any) -> dict[str, dict[str, list[str]]]:
    """``{machine: {role name: [holder, ...]}}`` from the other machines' listings in
    ``directory.json`` (their entries' ``roles``); ``{}`` when there are none. No network."""
    directory = read_directory(config)
    if not directory:
        return {}
    try:
        own = machine_name(config)
    except ValueError:
        return {}
    out: dict[str, dict[str, list[str]]] = {}
    for machine, entry in (directory.get("machines") or {}).items():
        if machine == own or not isinstance(entry, dict) or not isinstance(entry.get("roles"), dict):
            continue
        out[machine] = {str(name): [h for h in holders if isinstance(h, str)]
                        for name, holders in entry["roles"].items() if isinstance(holders, list)}
    return out


def role_elsewhere(config: Any, name: str) -> list[tuple[str, str]]:
    """``[(machine, holder), ...]`` for every holder another machine's listing gives the role
    ``name`` (its entry's ``roles``), sorted; ``[]`` when no other machine lists a holder.
    Reads ``directory.json``: no network."""
    return sorted((machine, h) for machine, roles in roles_of_others(config).items() for h in roles.get(name) or ())
