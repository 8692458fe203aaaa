"""The ``machines`` section of ``agent-link health`` and ``agent-link machines status``: read
from the relay's files and the outbox table, never from the network (health must be cheap),
and never raising on a bad setting (that is the section's ``problem``)."""

from __future__ import annotations

from typing import Any

from agent_link_core.mailbox import iso

from agent_link_machines.common import (
    URL_SETTING, age_ms, check_url, listing_stale, machine_name, plugin_dir, procedure_mismatches, read_directory, read_status, redact,
    relay_alive, remote_addresses, settings_key, shared_addresses,
)


def _ago(ms: int | None) -> str:
    if ms is None:
        return "never"
    s = max(0, ms) // 1000
    return f"{s} s ago" if s < 120 else f"{s // 60} min ago" if s < 7200 else f"{s // 3600} h ago"


def summary_line(d: dict[str, Any], seen: bool = True) -> str:
    """One line of a configured section (:func:`health_section`): ``laptop -> nats://host:4222,
    relay running, reachable, last contact 2 s ago, outbox 0, seen devbox (fresh), ci (stale 40 s)``
    (without ``seen``: up to the outbox), with ``, team:carol served on ci and laptop`` for
    each shared address and ``, procedure of reviewer differs on devbox (v2 there, v3 here)``
    for each procedure mismatch after the outbox."""
    reach = "reachable unknown" if d.get("reachable") is None else "reachable" if d["reachable"] else "unreachable"
    line = (f"{d.get('machine') or '(no valid name)'} -> {d['engine']}, relay {'running' if d.get('relayRunning') else 'not running'}, "
            f"{reach}, last contact {_ago(d.get('lastContactAgeMs'))}, outbox {d.get('outboxDepth', 0)}")
    for shared in d.get("sharedAddresses") or ():
        line += f", {shared['address']} served on {' and '.join(shared['machines'])}"
    for m in d.get("procedureMismatches") or ():
        line += (f", procedure of {m['role']} differs on {m['machine']} "
                 f"(v{m['there']['version'] or '?'} there, v{m['here']['version'] or '?'} here)")
    if not seen:
        return line
    others = ", ".join(f"{m['name']} ({'stale ' + _ago(m['ageMs']).removesuffix(' ago') if m['stale'] else 'fresh'})"
                       for m in d.get("machinesSeen") or () if m["name"] != d.get("machine"))
    return f"{line}, seen {others or 'no other machine'}"


def _shared(app: Any, own: str | None) -> list[dict[str, Any]]:
    """``[{address, machines}]``: the plain addresses several machines serve as this machine
    sees them (several other machines list one, or another lists one served here too), sorted;
    mail to each reaches one of them (README.md, "One address on two machines")."""
    where = remote_addresses(app.config)
    if not where:
        return []
    shared = {a: set(ms) for a, ms in shared_addresses(app.config).items()}
    if own is not None:
        from agent_link_presence.table import served_addresses

        for address in served_addresses(app.store.conn):
            if address in where:
                shared.setdefault(address, {where[address]}).add(own)
    return [{"address": a, "machines": sorted(ms)} for a, ms in sorted(shared.items())]


def health_section(app: Any) -> dict[str, Any]:
    """``{configured, engine, machine, relayRunning, reachable (None: unknown, the relay is
    not running), lastContact (ISO), lastContactAgeMs, error, outboxDepth, machinesSeen:
    [{name, ageMs, stale, sessions}], procedureMismatches: [{role, machine, there, here}]
    (:func:`agent_link_machines.common.procedure_mismatches`), sharedAddresses: [{address,
    machines}] (plain addresses served on several machines), summary}``: the summary names
    each mismatch and shared address; ``problem`` holds one line when something
    needs the person (a bad URL or machine name, the relay stopped by an error, which is
    shown while the settings are those it stopped with, or not running, the engine
    unreachable). ``summary`` is the one line ``agent-link health``
    prints."""
    config = app.config
    url = config.get(URL_SETTING)
    if not url:
        return {"configured": False, "note": f"{URL_SETTING} is unset: this machine works alone."}
    out: dict[str, Any] = {"configured": True, "engine": redact(url)}
    problem: str | None = None
    try:
        check_url(url)
    except ValueError as exc:
        problem = str(exc)
    try:
        out["machine"] = machine_name(config)
    except ValueError as exc:
        out["machine"] = None
        problem = problem or str(exc)
    status = read_status(config) or {}
    out["relayRunning"] = relay_alive(status, config)
    out["reachable"] = bool(status.get("reachable")) if out["relayRunning"] else None
    contact = status.get("lastContactMs")
    out["lastContact"] = iso(contact) if isinstance(contact, int) else None
    out["lastContactAgeMs"] = age_ms(contact)
    out["error"] = status.get("error")
    out["outboxDepth"] = int(app.store.conn.execute("SELECT COUNT(*) FROM machines_outbox WHERE sent_at IS NULL").fetchone()[0])
    seen = []
    directory = read_directory(config)
    for name, entry in sorted(((directory or {}).get("machines") or {}).items()):
        if isinstance(entry, dict):
            stale, age = listing_stale(entry, config)
            seen.append({"name": name, "ageMs": age, "stale": stale, "sessions": len(entry.get("sessions") or ())})
    out["machinesSeen"] = seen
    out["procedureMismatches"] = procedure_mismatches(app, directory)
    out["sharedAddresses"] = _shared(app, out.get("machine"))
    if problem is None and not out["relayRunning"]:
        log = plugin_dir(config) / "relay.log"
        if status.get("stopped") and status.get("error") and status.get("settings") == settings_key(config):
            problem = (f"the relay stopped: {str(status['error']).rstrip('.')} (its log: {log}); fix that, then run "
                       "`agent-link machines run` or restart the MCP server.")
        else:
            problem = "the relay is not running: start `agent-link machines run` (mail to other machines waits in the outbox)."
    elif problem is None and not out["reachable"]:
        problem = f"the engine is unreachable: {status.get('error') or 'no answer yet'} (mail waits in the outbox)."
    if problem is not None:
        out["problem"] = problem
    out["summary"] = summary_line(out)
    return out
