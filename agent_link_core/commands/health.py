"""``agent-link health``, ``plugins``, ``mcp`` and ``hook`` (the console script runs ``hook`` before click loads)."""

import sys
from typing import Any

import click

from agent_link_core import boundary
from agent_link_core.cli_run import NDJSON, argument, command, emit, fail, get_app, open_app, option
from agent_link_core.errors import AgentLinkError

JSON = option("--json", "as_json", flag=True, help="Print one JSON object.")


def _print_health(h: dict[str, Any]) -> None:
    click.echo(f"agent-link {h['version']}")
    settings = h.get("settings") or {}  # source "config": where the AGENT_LINK_ADDRESS setting was read is said
    read = (settings.get("sources") or {}).get("AGENT_LINK_ADDRESS") if h["addressSource"] == "config" else None
    click.echo(f"  address:    {h['address']} ({'settings file' if read == 'settings-file' else read or h['addressSource']})")
    click.echo(f"  host:       {h['host'] or 'unknown'}")
    click.echo(f"  state dir:  {h['stateDir']['path']} ({'exists' if h['stateDir']['exists'] else 'missing'})")
    for warning in (h["hostDetection"].get("warning"), h["stateDir"].get("warning")):
        if warning:
            click.echo(f"  warning: {warning['message']}. {warning['hint']}")
    click.echo(f"  settings:   {settings.get('file')}"
               + "".join(f"\n    {n} from {src}" for n, src in (settings.get("sources") or {}).items()))
    db = h["database"]
    click.echo(f"  database:   {db['path']} ({'ok' if db.get('ok', True) else 'REFUSING WRITES'}, WAL {db.get('walBytes', 0)} bytes)")
    if db.get("problem"):
        said = " ".join(str(db["problem"]["message"]).split())  # SQLite's own report may span lines
        click.echo(f"  problem:    {said}\n  to fix:     {db['problem'].get('hint', '')}")
    elif db["integrity"] != "ok":
        click.echo(f"  integrity:  {db['integrity']}")
    for name, line in [(n, s["summary"]) for n, s in (h.get("sections") or {}).items() if isinstance(s, dict) and s.get("summary")]:
        click.echo(f"  {name}: {line}")  # a section's own line (docs/plugins.md)
    for problem in [p for p in h.get("problems") or [] if "plugin" not in p]:  # what a plugin's section says needs the person
        click.echo(f"  problem in {problem['section']}: {problem['message']}" + (f"\n    to fix: {problem['hint']}" if problem.get("hint") else ""))
    click.echo(f"  plugins:    {', '.join(h['plugins']['loaded']) or 'none'}")
    if h["plugins"].get("warning"):
        click.echo(f"  warning: {h['plugins']['warning']['message']}. {h['plugins']['warning']['hint']}")
    for problem in [p for p in h.get("problems") or [] if "plugin" in p]:  # health.plugin_problems: one line each
        click.echo(f"  BROKEN plugin {problem['plugin']}: {problem['message']}. {problem['hint']}")
    for dep in h["env"]["deprecated"]:
        click.echo(f"  deprecated variable {dep['name']}: use {dep['canonical']}")
    for c in h["env"]["conflicts"]:
        click.echo(f"  conflict: {c['ignored']} ignored, {c['winner']} wins")
    click.echo(f"  reminders:  limit {h['reminders']['limit']}, every {h['reminders']['intervalMs']} ms")


@command(JSON, NDJSON, reader=True)
def health(ctx: Any, as_json: bool, ndjson: bool) -> None:
    """Show whether agent-link works here and what it sees (exit 1 when the database
    refuses writes: damaged, replaced, a full disk or a state dir this user cannot write; when a
    plugin's section reports a problem, such as a roles file that does not parse; or when a
    plugin is broken: it failed to import or register, was left out or failed in a hook,
    here or in another agent-link process in the last day)."""
    try:
        app = open_app(ctx)
    except AgentLinkError as exc:
        if as_json or ndjson:  # still one JSON object: health's answer is that agent-link cannot start here
            emit({"ok": False, "error": exc.to_dict()}, as_json, _print_health, ndjson)
        fail(exc)
    data = app.health()
    failing = not data["database"].get("ok", True) or bool(data.get("problems"))
    # `ok` as every failing command's JSON says it (the exit status: 1 when False)
    emit({"ok": not failing, **data}, as_json, _print_health, ndjson)
    if failing:
        sys.exit(1)


@command(JSON, NDJSON, reader=True)
def plugins(ctx: Any, as_json: bool, ndjson: bool) -> None:
    """List loaded, blocked and broken plugins (--json: with each plugin's hooks and the time each took in this process)."""
    from agent_link_core.health import plugins_view

    app = get_app(ctx)
    data = {**plugins_view(app), "hooks": app.hooks.hook_view()}

    def human(d: dict[str, Any]) -> None:
        for name in d["loaded"]:
            click.echo(f"{name} {d['versions'].get(name, '')}".rstrip())
        for name in d["blocked"]:
            click.echo(f"{name} (disabled by AGENT_LINK_DISABLE_PLUGINS)")
        for name, reason in d["failed"].items():
            click.echo(f"{name} BROKEN: {reason}\n  turn it off: AGENT_LINK_DISABLE_PLUGINS={name}")
        for problem in d["problems"]:
            if not problem["disabled"]:
                click.echo(f"{problem['plugin']} problem in {problem['hook']}: {problem['error']} ({problem['count']}x)\n  {problem['fix']}")
        for problem in d["elsewhere"]:
            click.echo(f"{problem['plugin']} problem in {problem['hook']} (process {problem['pid']}): {problem['error']}\n  {problem['fix']}")
        for name, hooks in d["hooks"].items():  # slow is no failure (a busy machine): said here, not on stderr
            for hook, timing in hooks.items():
                if timing and timing["maxMs"] > boundary.SLOW_MS:
                    click.echo(f"{name} slow in {hook}: {timing['maxMs']:.0f} ms in this process. {boundary.slow_hint(name)}")
        if not any(d[k] for k in ("loaded", "blocked", "failed")):
            click.echo("no plugins installed")

    emit(data, as_json, human, ndjson)


@command(option("--check", flag=True, help="Load what the server loads, exit 0 without serving (a launcher's probe)."))
def mcp(ctx: Any, check: bool = False) -> None:
    """Serve the agent-link MCP tools over stdio (hosts start this)."""
    from agent_link_core.server import main as serve_main

    if not check:
        serve_main()


@command(argument("host"), argument("event"))
def hook(ctx: Any, host: str, event: str) -> None:
    """Run a host hook: reads the host's hook JSON on stdin, prints the host's hook JSON.

    Always exits 0, so a failing hook never blocks a prompt.
    """
    from agent_link_core.hook import main as hook_main

    sys.exit(hook_main([host, event]))
