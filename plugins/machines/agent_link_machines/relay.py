"""The relay: the one process per machine (``agent-link machines run``) that talks to the engine.

It holds ``<state>/machines/relay.lock`` (``flock``), so a second relay of the same state
dir refuses to start, and runs three loops over one NATS connection (nats-py reconnects
by itself after the server went away):

* **directory**: every heartbeat it puts this machine's listing (every local harness's
  sessions, the plain addresses served here, who holds each role here) under ``dir.<machine>`` in the KV bucket
  ``agent_link_machines``, reads the other machines' entries and writes
  ``directory.json`` / ``status.json`` for the other processes of the machine, checks its
  name claim (:meth:`Relay.claim`) and sends on local mail to addresses the directory now
  shows on another machine (:meth:`Relay.forward_stranded`);
* **outbox**: it publishes the unsent rows of ``machines_outbox`` (written by the plugin's
  ``agent_link_record_event`` in the same transaction as the mail) to
  ``agent_link.mail.<machine>`` of the stream ``AGENT_LINK_MAIL``, consecutive rows for one
  machine packed into one engine message (:func:`pack_rows`), with ``Nats-Msg-Id`` set so
  the server drops a repeat; a row is marked sent only once the server acknowledged its
  message, so an engine that is down keeps everything queued here;
* **inbound**: it pulls from its durable consumer ``machine_<machine>`` (explicit acks),
  stores each fetched batch in one local transaction (:func:`agent_link_machines.records.store_record`,
  idempotent on the id), and acknowledges its records only after that commit: a crash between
  the two brings the record again, and applying it again changes nothing. A second consumer
  drains the subject earlier plugin versions published on (:meth:`Relay.consumer_names`,
  :meth:`Relay.legacy_problem`).

At start it claims its machine name: ``claim.<machine>`` in the bucket is created with this
state dir's instance id, and a name claimed by another instance is refused
(:class:`MachinesError`), so two machines can never share one name and one subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.store import now_ms
from agent_link_core.wake import notify
from agent_link_waits.wakeup import Wakeup

from agent_link_machines.common import (
    BUCKET, CREDS_SETTING, NAME, STREAM, SUBJECT_PREFIX, URL_SETTING, cancel_until_done, heartbeat_ms, legacy_durable,
    legacy_subject, local_enforcement, local_procedures, local_roles, mail_durable, mail_subject, machine_name, outbox_signal, plugin_dir,
    is_machine_name, read_status, redact, remote_addresses, settings_key, upgraded_durable, url_user, write_json,
)
from agent_link_machines.common import check_url as common_check_url
from agent_link_machines.records import answers_sent, apply_entries, claimed_origins, forward_stranded, records_of
from agent_link_machines.secure import TLSNotOffered, open_connection

log = logging.getLogger(__name__)
OUTBOX_BATCH = 1024  # outbox rows read and published per round
#: records per engine message at most (:func:`pack_rows`), and its bytes at most
PACK_RECORDS = 64
PACK_BYTES = 256 * 1024
FETCH_BATCH = 32  # engine messages per pull: at most FETCH_BATCH * PACK_RECORDS records in one local transaction
PUBLISH_TIMEOUT_S = 2.0
#: after a round that published, the next one reads the outbox this many seconds later: while
#: senders are busy a round then carries more rows, so the engine writes (and syncs) fewer,
#: larger packs and the receiving relay stores them in fewer transactions; a first message
#: after a quiet spell goes out at once
OUTBOX_GATHER_S = 0.005
RETRY_S = 0.5
CONNECT_TIMEOUT_S = 2  # one connection attempt, s: a host that does not answer costs this, then a clear line
#: every this many heartbeats the relay looks for stranded local mail to every address another
#: machine lists, not only to the newly listed ones (Relay.forward_stranded)
RESCAN_BEATS = 12
SENT_KEPT_MS = 24 * 3600_000  # how long an acknowledged outbox row stays in the table
#: JetStream 2.10 is the oldest server with the stream and KV features used here
MIN_SERVER = (2, 10)


class MachinesError(Exception):
    """A problem the relay cannot get past by waiting (a wrong URL, wrong credentials, a
    name taken, an engine too old); ``str()`` is one line for the person."""


def check_url(url: str | None) -> list[str]:
    """The server URLs of ``AGENT_LINK_ENGINE_URL`` (:func:`agent_link_machines.common.check_url`).

    :raises MachinesError: unset, or an entry that is not ``nats|tls|ws|wss://host[:port]``.
    """
    try:
        return common_check_url(url)
    except ValueError as exc:
        raise MachinesError(str(exc)) from None


def instance_id(config: Any) -> str:
    """This state dir's random instance id (made once, kept in ``<state>/machines/instance``)."""
    return _kept_token(config, "instance")


def msg_id_key(config: Any) -> bytes:
    """This state dir's secret key for the engine's de-duplication ids (:func:`pack_rows`),
    made once and kept in ``<state>/machines/msgid-key`` (0600). It never leaves the machine:
    another machine that learns a record id cannot compute the id the genuine record is
    published under, so it cannot have the server drop that record as a repeat."""
    return _kept_token(config, "msgid-key").encode("ascii")


def _kept_token(config: Any, name: str) -> str:
    """A random token made once and kept in ``<state>/machines/<name>`` (0600)."""
    path = plugin_dir(config) / name
    with contextlib.suppress(OSError):
        found = path.read_text(encoding="utf-8").strip()
        if found:
            return found
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    made = secrets.token_hex(12)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(made)
    return made


def take_lock(config: Any) -> int:
    """Hold ``relay.lock`` for this process's life; returns its fd.

    :raises MachinesError: another relay of this state dir runs.
    """
    path = plugin_dir(config) / "relay.lock"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise MachinesError(f"another relay of this state dir ({path.parent.parent}) is running.") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def record_stop(config: Any, error: str) -> None:
    """Write ``status.json`` for a relay that stops before it ran (:class:`Relay` refused its
    settings): stopped, with ``error``, so health says why and not only "not running"; the
    last contact of the relay before it is kept. Best effort (health then says less)."""
    before = read_status(config) or {}
    with contextlib.suppress(OSError):
        write_json(plugin_dir(config) / "status.json", {
            "at": now_ms(), "heartbeatMs": heartbeat_ms(config), "settings": settings_key(config), "stopped": True,
            "reachable": False, "error": error,
            "engine": redact(config.get(URL_SETTING)), "lastContactMs": before.get("lastContactMs")})


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no answer"
    text = (str(exc).strip() or type(exc).__name__).removeprefix("nats: ")
    if len(text) > 1 and text[0] == text[-1] == "'":  # nats-py quotes the server's -ERR text
        text = text[1:-1]
    return text


def _unreachable(exc: BaseException) -> str:
    """Why a connection attempt failed, in a few words a person can act on (``exc``: what
    nats-py reported: an OSError, a timeout)."""
    import socket

    if isinstance(exc, socket.gaierror):
        return f"its host name does not resolve ({_describe(exc)}): check the host in {URL_SETTING}"
    if isinstance(exc, ConnectionRefusedError):
        return f"nothing listens there (connection refused): check the port in {URL_SETTING}"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    return _describe(exc)


def is_permission_error(text: str | None) -> bool:
    """Whether an error nats-py reported is the server refusing a subject to this user."""
    return bool(text) and "permissions violation" in str(text).lower()


def pack_rows(rows: list[Any], origin: str, limit_bytes: int = PACK_BYTES, key: bytes = b"") -> list[tuple[list[Any], str, bytes, str]]:
    """Outbox rows (mappings with ``record_id``, ``machine``, ``payload``: JSON text) of machine
    ``origin`` as engine messages ``(rows, subject, data, Nats-Msg-Id)`` (subject:
    :func:`~agent_link_machines.common.mail_subject`), in the rows' order. A row alone is its
    record under the id ``<origin>.<record id>.<tag>``; consecutive rows for the same machine go
    together as one ``{"type": "batch", "records": [...]}`` of at most :data:`PACK_RECORDS`
    records and ``limit_bytes`` bytes of records (a larger record goes alone), under the id
    ``<origin>.batch.<tag>``. A tag is an HMAC-SHA256 (``key``: :func:`msg_id_key`, this
    machine's secret) of the record ids: the server de-duplicates on the id across the whole
    stream, whatever the subject, so an id another machine could compute from a record id
    would let it publish first and have the genuine record dropped. The engine writes (with ``sync_interval:
    always``: syncs) once per message, so a burst costs it one write per pack instead of one
    per record. Rows published again in another grouping get another id, so the engine's
    de-duplication does not catch that repeat: the receiving machine does, as it applies each
    record at most once (:func:`agent_link_machines.records.store_record`)."""
    groups: list[list[Any]] = []
    size = 0
    for row in rows:
        need = len(row["payload"]) + 2
        current = groups[-1] if groups else None
        if current is None or current[0]["machine"] != row["machine"] or len(current) >= PACK_RECORDS or size + need > limit_bytes:
            groups.append([row])
            size = need
        else:
            current.append(row)
            size += need
    packs = []
    for group in groups:
        subject = mail_subject(group[0]["machine"], origin)
        tag = hmac.new(key, "\n".join(r["record_id"] for r in group).encode("utf-8"), hashlib.sha256).hexdigest()[:32]
        if len(group) == 1:
            packs.append((group, subject, group[0]["payload"].encode("utf-8"), f"{origin}.{group[0]['record_id']}.{tag}"))
            continue
        data = '{"type": "batch", "records": [' + ", ".join(r["payload"] for r in group) + "]}"
        packs.append((group, subject, data.encode("utf-8"), f"{origin}.batch.{tag}"))
    return packs


class Relay:
    """This machine's link to the engine (see the module docstring).

    :param app: the :class:`~agent_link_core.app.App` of this process (its state dir and database).
    :param idle_exit_s: stop (return from :meth:`run`) once the outbox is empty and nothing
        was sent or applied for this many seconds; None: run until cancelled.
    :raises MachinesError: ``AGENT_LINK_ENGINE_URL`` unset or not a NATS URL, a creds file that is not one.
    :raises ValueError: ``AGENT_LINK_MACHINE`` is not a machine name.
    """

    def __init__(self, app: Any, idle_exit_s: float | None = None) -> None:
        self.app = app
        self.idle_exit_s = idle_exit_s
        self.last_work = time.monotonic()  # the last record sent or applied
        self.config = app.config
        self.machine = machine_name(self.config)
        self.servers = check_url(self.config.get(URL_SETTING))
        self.creds = self.config.get(CREDS_SETTING)
        if self.creds and not Path(self.creds).is_file():
            raise MachinesError(f"{CREDS_SETTING}={self.creds} is not a readable credentials file.")
        if self.creds:
            try:  # nats-py signs the server's nonce with it; a dependency of this plugin (pyproject.toml)
                import nkeys  # noqa: F401
            except ImportError:
                raise MachinesError(f"{CREDS_SETTING} needs the nkeys package, which is not installed here: "
                                    "pip install nkeys (or reinstall agent-link-machines).") from None
        self.heartbeat_s = heartbeat_ms(self.config) / 1000
        self.instance = instance_id(self.config)
        self.msg_id_key = msg_id_key(self.config)
        self.reachable = False
        self.last_contact: int | None = None
        self.error: str | None = None
        self.stopped = False  # run() returned: status.json says so at once, not after 3 heartbeats
        self.nc: Any = None
        self.js: Any = None
        self.kv: Any = None
        self.sent = 0
        self.applied = 0
        self.machines_seen: list[str] = []
        self.refused: str | None = None  # the last subject the server refused this user (is_permission_error)
        self.claimed: set[str] = set()  # machines whose name claim the engine showed (legacy_problem)
        self.last_views: list[dict[str, Any]] = []  # the sessions of the last listing published (local_listing)
        self.routed: dict[str, str] = {}  # {address: machine} of the directory as forward_stranded last saw it
        self.beats = 0

    # -- connection ----------------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"servers": self.servers, "name": f"agent-link {self.machine}", "connect_timeout": CONNECT_TIMEOUT_S}
        if self.creds:
            opts["user_credentials"] = self.creds
        return opts

    async def probe(self) -> None:
        """One connection attempt per server, no retries.

        :raises MachinesError: credentials refused, or an engine without JetStream or too old.
        :raises ConnectionError: nothing answered (the caller retries).
        """

        errors: list[BaseException] = []

        async def note(exc: BaseException) -> None:
            errors.append(exc)

        try:
            nc = await open_connection(**self._options(), allow_reconnect=False, max_reconnect_attempts=1,
                                       reconnect_time_wait=0.1, error_cb=note)
        except Exception as exc:  # nats-py raises its own errors, OSErrors and timeouts here
            last = errors[-1] if errors else exc
            insecure = next((e for e in [*errors, exc] if isinstance(e, TLSNotOffered)), None)
            if insecure is not None:
                raise MachinesError(str(insecure)) from None
            text = _describe(last)
            engine = redact(",".join(self.servers))
            if "authorization" in text.lower() or "authentication" in text.lower():
                user = url_user(self.config.get(URL_SETTING))
                whose = (f"for user {user}" if user else f"of {CREDS_SETTING}" if self.creds
                         else f"({URL_SETTING} gives none: nats://user:password@host:4222)")
                raise MachinesError(f"the engine at {engine} refused the credentials {whose} ({text}).") from None
            if isinstance(last, ImportError):  # a part of nats-py missing here: waiting will not bring it
                raise MachinesError(f"cannot connect to the engine: {text} (pip install {getattr(last, 'name', None) or 'it'}).") from None
            raise ConnectionError(f"cannot reach the engine at {engine}: {_unreachable(last)}") from None
        try:
            found = nc.connected_server_version
            version = tuple(int(p) for p in (found.major, found.minor))
            if version < MIN_SERVER:
                raise MachinesError(f"the engine is NATS {found.major}.{found.minor}.{found.patch}; "
                                    f"agent-link needs {MIN_SERVER[0]}.{MIN_SERVER[1]} or later.")
            js = nc.jetstream()
            try:
                await js.account_info()
            except Exception as exc:
                detail = getattr(exc, "description", None) or (str(exc) if type(exc).__name__ not in str(exc) else None)
                raise MachinesError(f"the engine at {redact(','.join(self.servers))} has no JetStream"
                                    f"{f' ({detail})' if detail else ''}; "
                                    "start nats-server with -js (or a jetstream block).") from None
        finally:
            await nc.close()

    async def connect(self) -> None:
        """Probe until the engine answers, then open the lasting connection and set up the
        stream, the bucket, the name claim and the consumer.

        :raises MachinesError: what waiting cannot fix (see :meth:`probe`, :meth:`claim`).
        """

        said = None
        while True:
            try:
                await self.probe()
                break
            except ConnectionError as exc:
                self._set(False, str(exc))
                if str(exc) != said:  # one line per new reason, not one per attempt
                    said = str(exc)
                    log.warning("agent-link: %s; retrying every %g s (mail waits in the outbox)", said, RETRY_S)
                await asyncio.sleep(RETRY_S)

        async def on_error(exc: BaseException) -> None:
            self.error = _describe(exc)
            if is_permission_error(self.error):
                self.refused = self.error

        async def on_disconnect() -> None:
            self._set(False, "disconnected")

        async def on_reconnect() -> None:
            self._set(True, None)

        self.nc = await open_connection(**self._options(), allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=RETRY_S,
                                     error_cb=on_error, disconnected_cb=on_disconnect, reconnected_cb=on_reconnect)
        from nats.js.api import RetentionPolicy, StorageType, StreamConfig

        self.js = self.nc.jetstream(timeout=PUBLISH_TIMEOUT_S)
        # work-queue retention: a record leaves the stream once its machine acknowledged it
        await self.js.add_stream(StreamConfig(name=STREAM, subjects=[SUBJECT_PREFIX + ">"], storage=StorageType.FILE,
                                              retention=RetentionPolicy.WORK_QUEUE, duplicate_window=120.0))
        self.kv = await self.js.create_key_value(bucket=BUCKET, history=1)
        await self.claim()
        self._set(True, None)

    async def claim(self) -> None:
        """Claim the machine name for this state dir's instance.

        :raises MachinesError: another instance holds the name.
        """
        from nats.js.errors import KeyWrongLastSequenceError

        key = f"claim.{self.machine}"
        try:
            await self.kv.create(key, self.instance.encode())
            return
        except KeyWrongLastSequenceError:
            entry = await self.kv.get(key)
        holder = (entry.value or b"").decode("utf-8", "replace")
        if holder != self.instance:
            raise MachinesError(
                f"machine name {self.machine!r} is already used by another machine (instance {holder[:8]}…); "
                f"set AGENT_LINK_MACHINE to another name, or run "
                f"`agent-link machines release {self.machine}` on the machine that holds it.")

    def _set(self, reachable: bool, error: str | None) -> None:
        self.reachable = reachable
        if reachable:
            self.last_contact = now_ms()
        if error is not None or reachable:
            self.error = error
        self._write_status()

    def _write_status(self, machines: list[str] | None = None) -> None:
        if machines is not None:
            self.machines_seen = machines
        data = {"at": now_ms(), "heartbeatMs": int(self.heartbeat_s * 1000), "settings": settings_key(self.config), "stopped": self.stopped,
                "machine": self.machine, "engine": redact(",".join(self.servers)), "reachable": self.reachable,
                "lastContactMs": self.last_contact, "error": self.error, "pid": os.getpid(), "sent": self.sent, "applied": self.applied,
                "machinesSeen": self.machines_seen}
        try:
            write_json(plugin_dir(self.config) / "status.json", data)
        except OSError as exc:
            log.warning("agent-link: cannot write status.json: %s", exc)

    # -- loops ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, then run the three loops until cancelled (by :meth:`idle_watch` too) or a :class:`MachinesError`. Any
        other failure (the engine went away while the stream or consumer was being set up)
        closes the connection and starts over after :data:`RETRY_S`: mail waits meanwhile,
        unless the server refused this user a subject meanwhile (:meth:`permission_problem`).
        As it returns it writes ``status.json`` with ``stopped`` and, for a
        :class:`MachinesError`, its line as ``error``.

        :raises MachinesError: what waiting cannot fix (:meth:`connect`), or subjects refused.
        """
        helpers = [asyncio.create_task(self.status_loop())]
        if self.idle_exit_s is not None:
            helpers.append(asyncio.create_task(self.idle_watch(asyncio.current_task())))
        fatal: str | None = None  # why it stops, when that is an error (not a signal, not idle)
        try:
            while True:
                try:
                    await self._session()
                except (MachinesError, asyncio.CancelledError):
                    raise
                except Exception as exc:
                    if self.refused is not None:  # the server refuses this user a subject: waiting will not help
                        raise MachinesError(self.permission_problem()) from None
                    log.warning("agent-link: relay lost the engine (%s); starting over", _describe(exc))
                    self._set(False, _describe(exc))
                    await asyncio.sleep(RETRY_S)
        except MachinesError as exc:  # health shows why the relay stopped (status.json), not only relay.log
            fatal = str(exc)
            raise
        finally:
            for helper in helpers:
                helper.cancel()
            self.reachable, self.stopped, self.error = False, True, fatal
            self._write_status()  # before awaiting: a stop cancels again (cancel_until_done), cutting awaits short
            await asyncio.gather(*helpers, return_exceptions=True)

    def permission_problem(self) -> str:
        """The line for a server that refused this machine's user a subject of its own
        (:attr:`refused`): the user is another machine's, or its permissions are not this
        machine's (``agent-link machines permissions``)."""
        user = url_user(self.config.get(URL_SETTING))
        return (f"the engine refuses {'user ' + user if user else 'this connection'} the subjects of machine {self.machine} "
                f"({self.refused}): its permissions must be those of `agent-link machines permissions {self.machine}` "
                f"(is {URL_SETTING} another machine's user?).")

    async def idle_watch(self, main: asyncio.Task[Any] | None) -> None:
        """Cancel ``main`` (the task running :meth:`run`) once the outbox is empty and nothing
        was sent or applied for :attr:`idle_exit_s` seconds."""
        assert self.idle_exit_s is not None and main is not None
        while True:
            await asyncio.sleep(min(1.0, self.idle_exit_s))
            if time.monotonic() - self.last_work >= self.idle_exit_s and not self._unsent():
                return cancel_until_done(main)

    async def status_loop(self) -> None:
        """Rewrite ``status.json`` every heartbeat, whatever the engine does: its age tells
        the machine's other processes that the relay runs (a call to a dead engine may hang
        for seconds)."""
        while True:
            self._write_status()
            await asyncio.sleep(self.heartbeat_s)

    async def _session(self) -> None:
        tasks: list[asyncio.Task[None]] = []
        self.refused = None
        try:
            await self.connect()
            tasks = [asyncio.create_task(c) for c in (self.directory_loop(), self.outbox_loop(), self.inbound_loop())]
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.nc is not None:
                with contextlib.suppress(Exception):
                    await self.nc.close()
                self.nc = None

    async def local_listing(self) -> dict[str, Any]:
        """This machine's directory entry: its harnesses' sessions (not the other machines'
        this plugin lists), its plain addresses, who holds each role here (another
        machine's send to ``role:<name>`` comes here when no session there holds it), its
        role enforcement mode (another machine applies it to direct mail to those holders)
        and its role procedures' versions (another machine shows one that differs). A harness whose listing is
        incomplete (``incomplete``) keeps the sessions this relay published for it last."""
        from agent_link_core.directory import gather_listings, session_view
        from agent_link_presence.table import served_addresses

        local = {n: h for n, h in self.app.harnesses.items() if n != NAME}
        listings = await gather_listings(self.app, harnesses=local, limit=200)
        sessions = [s for listing in listings.values() for s in listing.sessions] + self.app.hooks.present_sessions("all")
        views = []
        for s in sessions:
            view = session_view(s)
            view["lastActivityMs"] = s.last_activity_ms
            views.append(view)
        served = served_addresses(self.app.store.conn, 1000)
        incomplete = sorted(n for n, listing in listings.items() if not listing.complete)
        # a harness that could not list all its sessions now (its host slow or away) keeps those it listed last:
        # another machine would refuse mail to them as not found meanwhile
        listed = {view["address"] for view in views}
        views += [view for view in self.last_views if view.get("harness") in incomplete and view["address"] not in listed]
        self.last_views = views
        return {"at": now_ms(), "heartbeatMs": int(self.heartbeat_s * 1000), "machine": self.machine, "instance": self.instance,
                "sessions": views, "served": served, "incomplete": incomplete, "roles": local_roles(self.app),
                "roleEnforcement": local_enforcement(self.app), "procedures": local_procedures(self.app)}

    async def directory_loop(self) -> None:
        """Publish this machine's listing and copy the others' every heartbeat."""
        from nats.js.errors import NoKeysError

        while True:
            try:
                await self.claim()  # released meanwhile: claimed again; taken by another instance: stop (MachinesError)
                entry = await self.local_listing()
                await self.kv.put(f"dir.{self.machine}", json.dumps(entry, ensure_ascii=False).encode())
                machines: dict[str, Any] = {}
                try:
                    keys = await self.kv.keys()
                except NoKeysError:
                    keys = []
                for key in (k for k in keys if k.startswith("dir.")):
                    got = await self.kv.get(key)
                    with contextlib.suppress(ValueError, TypeError):
                        value = json.loads(got.value or b"{}")
                        if isinstance(value, dict):
                            machines[key.removeprefix("dir.")] = value
                write_json(plugin_dir(self.config) / "directory.json", {"at": now_ms(), "machines": machines})
                self.forward_stranded()
                with self.app.store.write() as conn:  # sent rows are kept a day, for inspection
                    conn.execute("DELETE FROM machines_outbox WHERE sent_at IS NOT NULL AND sent_at < ?", (now_ms() - SENT_KEPT_MS,))
                self._set(True, None)
                self._write_status(sorted(machines))
            except (asyncio.CancelledError, MachinesError):
                raise
            except Exception as exc:  # the engine is away: the listing stays as last read, marked stale by age
                self._set(False, _describe(exc))
            await asyncio.sleep(self.heartbeat_s)

    def forward_stranded(self) -> None:
        """Send on the local mail to addresses another machine now lists
        (:func:`~agent_link_machines.records.forward_stranded`): every heartbeat for the
        addresses newly listed (or listed by another machine than before), every
        :data:`RESCAN_BEATS` heartbeats for all (a send that read the directory just before it
        changed)."""
        where = remote_addresses(self.config)
        self.beats += 1
        fresh = list(where) if self.beats % RESCAN_BEATS == 1 else [a for a, m in where.items() if self.routed.get(a) != m]
        try:
            moved = bool(fresh) and forward_stranded(self.app, where, fresh)
        except AgentLinkError as exc:  # the local database, not the engine: tried again next heartbeat
            log.warning("agent-link: stranded mail not sent on yet: %s", exc)
            return
        self.routed = dict(where)  # only once done: a failed pass leaves the new addresses new
        if moved:
            notify(outbox_signal(self.config))

    def _unsent(self) -> list[Any]:
        return self.app.store.conn.execute(
            "SELECT seq, record_id, machine, payload FROM machines_outbox WHERE sent_at IS NULL ORDER BY seq LIMIT ?",
            (OUTBOX_BATCH,)).fetchall()

    async def outbox_loop(self) -> None:
        """Publish the outbox, a batch of rows at a time in packs (:func:`pack_rows`); a row is
        marked sent once the server acknowledged its pack."""
        wakeup = Wakeup(outbox_signal(self.app.config))  # poked by the writers of the outbox only (plugin.agent_link_on_event)
        try:
            while True:
                rows = self._unsent()
                if not rows:
                    await wakeup.wait(self.heartbeat_s)
                    continue
                limit = min(PACK_BYTES, int(getattr(self.nc, "max_payload", 0) or PACK_BYTES) // 2)
                packs = pack_rows(rows, self.machine, limit, self.msg_id_key)
                # every pack in flight at once; records do not depend on each other's order,
                # so the acknowledged ones are marked even when others failed
                acks = await asyncio.gather(*(
                    self.js.publish(subject, data, headers={"Nats-Msg-Id": msg_id}) for _, subject, data, msg_id in packs),
                    return_exceptions=True)
                done = [row["seq"] for (group, *_), ack in zip(packs, acks) if not isinstance(ack, BaseException) for row in group]
                failed = next((ack for ack in acks if isinstance(ack, BaseException)), None)
                if isinstance(failed, asyncio.CancelledError):
                    raise failed
                if failed is not None:  # down or slow: what was not acknowledged goes again (applied at most once there)
                    self._set(False, _describe(failed))
                if done:
                    at = now_ms()
                    with self.app.store.write() as conn:
                        conn.executemany("UPDATE machines_outbox SET sent_at = ? WHERE seq = ?", [(at, s) for s in done])
                    self.sent += len(done)
                    self.last_work = time.monotonic()
                if failed is not None:
                    await asyncio.sleep(RETRY_S)
                elif len(rows) < OUTBOX_BATCH:
                    await asyncio.sleep(OUTBOX_GATHER_S)
        finally:
            wakeup.close()

    async def inbound_loop(self) -> None:
        """Apply what other machines sent here, acknowledging each record after its commit:
        the mail on ``mail_subject(<this machine>, "*")``, and what is left on (or still comes
        to) the subject of earlier plugin versions, ``legacy_subject(<this machine>)``
        (applied as :meth:`apply_batch` says with ``legacy``), each with its consumer
        (:meth:`consumer_names`)."""
        from nats.js.api import AckPolicy, ConsumerConfig

        subject, old = mail_subject(self.machine, "*"), legacy_subject(self.machine)
        mail, legacy = await self.consumer_names()
        subs = [await self.js.pull_subscribe(filtered, durable=durable, stream=STREAM,
                                             config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=30))
                for filtered, durable in ((subject, mail), (old, legacy))]
        pulls = [asyncio.create_task(self._pull(subs[0], subject, False)), asyncio.create_task(self._pull(subs[1], old, True))]
        try:
            await asyncio.gather(*pulls)
        finally:  # one failed: the other must not run on, on a connection its session closes
            for pull in pulls:
                pull.cancel()
            await asyncio.gather(*pulls, return_exceptions=True)

    async def consumer_names(self) -> tuple[str, str]:
        """``(durable reading mail_subject, durable reading legacy_subject)`` of this machine.

        ``mail_durable`` (``machine_<name>``) reads the mail; on a machine upgraded from an
        earlier version it exists filtered to the old subject, and keeps reading it from where
        that version stopped (its filter cannot just be changed: its position would then skip
        the new mail already waiting), while ``upgraded_durable`` reads the new subject from
        the start of the stream. Otherwise ``legacy_durable`` reads the old subject."""
        from nats.js.errors import NotFoundError

        try:
            info = await self.js.consumer_info(STREAM, mail_durable(self.machine))
        except NotFoundError:
            return mail_durable(self.machine), legacy_durable(self.machine)
        if info.config.filter_subject == legacy_subject(self.machine):
            return upgraded_durable(self.machine), mail_durable(self.machine)
        return mail_durable(self.machine), legacy_durable(self.machine)

    async def _pull(self, sub: Any, subject: str, legacy: bool) -> None:
        from nats.errors import TimeoutError as NatsTimeout

        while True:
            try:
                msgs = await sub.fetch(FETCH_BATCH, timeout=self.heartbeat_s)
            except (NatsTimeout, asyncio.TimeoutError):
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._set(False, _describe(exc))
                await asyncio.sleep(RETRY_S)
                continue
            await self.apply_batch(msgs, subject, legacy=legacy)

    async def legacy_problem(self, records: list[dict[str, Any]]) -> str | None:
        """Why the records of one engine message on ``legacy_subject`` are not taken (None: they
        are). That subject does not name the publisher, so what the old form allows is checked:
        every record names an origin, and all the same one; it is another machine, one that claimed
        its name in the engine; a resolution or delivery is of a message this machine sent to
        that very machine (:func:`~agent_link_machines.records.sent_to`). A message record passes these, but which machine
        published it stays unproven: its sender is stored unverified."""
        origins = {o for r in records for o in claimed_origins(r)}
        if not all(claimed_origins(r) for r in records) or len(origins) != 1:
            return f"its records do not all name one origin ({', '.join(sorted(origins)) or 'none'})"
        [origin] = origins
        if not is_machine_name(origin):
            return f"its origin {origin!r} is not a machine name"
        if origin == self.machine:
            return f"the records name this machine ({origin}) as their origin"
        if origin not in self.claimed:
            from nats.js.errors import KeyNotFoundError

            try:
                await self.kv.get(f"claim.{origin}")
            except KeyNotFoundError:
                return f"no machine named {origin} claimed its name in the engine"
            self.claimed.add(origin)
        for record in records:
            if not answers_sent(self.app, record, origin):
                return f"{origin} answers message {record.get('messageId')}, which this machine never sent to it"
        return None

    async def _taken(self, msg: Any, subject: str, legacy: bool) -> list[dict[str, Any]] | None:
        """The records of engine message ``msg`` to store (:meth:`apply_batch`), None to drop it (logged)."""
        records = records_of(msg.data)
        if records is None:
            log.warning("agent-link: a record that is not a JSON object on %s was dropped", subject)
            return None
        if legacy:
            problem = await self.legacy_problem(records)
            if problem is not None:
                log.warning("agent-link: a record on %s was dropped: %s", subject, problem)
                return None
            return records
        publisher = str(msg.subject).rpartition(".")[2]
        forged = sorted({o for r in records for o in claimed_origins(r)} - {publisher})
        if forged:  # its own machine attests a record, and the subject says which machine that was
            log.warning("agent-link: records claiming to come from %s, published by machine %s, were dropped", ", ".join(forged), publisher)
            return None
        # only the machine a message was sent to may answer it or report its delivery
        answers = [r for r in records if not answers_sent(self.app, r, publisher)]
        if answers:
            log.warning("agent-link: machine %s answers message(s) %s, which this machine never sent to it: dropped", publisher,
                        ", ".join(sorted({str(r.get("messageId")) for r in answers})))
            records = [r for r in records if answers_sent(self.app, r, publisher)]
        return records or None

    async def apply_batch(self, msgs: list[Any], subject: str, legacy: bool = False) -> None:
        """Store a fetched batch in one write transaction (each record a savepoint of it, so
        one that fails leaves the others), then push the new messages and acknowledge: an
        engine message (one record, or a pack of them: :func:`pack_rows`) is acknowledged only
        once its records' commit is done; one with a record not stored is nak'ed and comes
        again (its stored records then change nothing). A commit that fails stores none and
        acknowledges none.

        The publisher is the subject's last token, and every origin a record claims must be
        it. With ``legacy`` (``legacy_subject``: earlier versions, whose subject does not name
        the publisher) an engine message is taken only when :meth:`legacy_problem` finds
        nothing wrong, and the senders of its messages are stored unverified
        (:func:`~agent_link_machines.records.store_record`); the others are dropped."""
        entries: list[tuple[Any, list[dict[str, Any]]]] = []
        for msg in msgs:
            try:
                records = await self._taken(msg, subject, legacy)
                if records is None:
                    await msg.term()
                    continue
            except Exception as exc:  # the engine or the database failed a check: the message comes again
                log.warning("agent-link: a record on %s was not checked (%s); the engine delivers it again", subject, _describe(exc))
                with contextlib.suppress(Exception):
                    await msg.nak(delay=RETRY_S)
                continue
            entries.append((msg, records))
        stored, failed, applied = apply_entries(self.app, entries, legacy)
        self.applied += applied
        for msg, rows in failed:
            for row in rows:  # committed: a repeat of its pack finds them stored and pushes nothing
                await self.app.push(row, {})
            with contextlib.suppress(Exception):
                await msg.nak(delay=RETRY_S)
        for msg, rows in stored:
            for row in rows:
                await self.app.push(row, {})
            self.last_work = time.monotonic()
            with contextlib.suppress(Exception):  # an ack lost: the record comes again and changes nothing
                await msg.ack()

