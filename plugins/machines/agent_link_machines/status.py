"""The ``machines`` section of ``agent-link health``: read from the relay's files and the
outbox table, never from the network (health must be cheap)."""

from __future__ import annotations

from typing import Any

from agent_link_core.mailbox import iso

from agent_link_machines.common import URL_SETTING, age_ms, machine_name, read_directory, read_status, redact, stale_after_ms


def health_section(app: Any) -> dict[str, Any]:
    """``{configured, engine, machine, relayRunning, reachable, lastContact, error,
    outboxDepth, machinesSeen: [{name, ageMs, stale, sessions}]}``; ``problem`` holds one
    line when something needs the person (a bad machine name, the relay not running, the
    engine unreachable)."""
    config = app.config
    url = config.get(URL_SETTING)
    if not url:
        return {"configured": False, "note": f"{URL_SETTING} is unset: this machine works alone."}
    out: dict[str, Any] = {"configured": True, "engine": redact(url)}
    try:
        out["machine"] = machine_name(config)
    except ValueError as exc:
        out["machine"], out["problem"] = None, str(exc)
    status = read_status(config) or {}
    relay_age = age_ms(status.get("at"))
    stale_ms = stale_after_ms(config)
    out["relayRunning"] = relay_age is not None and relay_age <= stale_ms
    out["reachable"] = bool(status.get("reachable")) and out["relayRunning"]
    out["lastContact"] = iso(status.get("lastContactMs")) if isinstance(status.get("lastContactMs"), int) else None
    out["error"] = status.get("error")
    out["outboxDepth"] = int(app.store.conn.execute("SELECT COUNT(*) FROM machines_outbox WHERE sent_at IS NULL").fetchone()[0])
    seen = []
    for name, entry in sorted(((read_directory(config) or {}).get("machines") or {}).items()):
        if isinstance(entry, dict):
            age = age_ms(entry.get("at"))
            seen.append({"name": name, "ageMs": age, "stale": age is None or age > stale_ms, "sessions": len(entry.get("sessions") or ())})
    out["machinesSeen"] = seen
    if "problem" not in out:
        if not out["relayRunning"]:
            out["problem"] = "the relay is not running: start `agent-link machines run` (mail to other machines waits in the outbox)."
        elif not out["reachable"]:
            out["problem"] = f"the engine is unreachable: {status.get('error') or 'no answer'} (mail waits in the outbox)."
    return out
