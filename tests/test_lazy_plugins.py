"""A plugin declares what it contributes; the code behind it loads when used
(docs/plugins.md, section 1; :mod:`agent_link_core.contribute`).

* A plugin whose heavy module raises on import loses only its own command and tool: the
  root ``--help``, ``tools/list`` and health still name them, everything else works.
* ``agent-link send`` and ``agent-link inbox`` (text output, every installed plugin) import
  none of the heavy modules: checked in a subprocess through ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_testing.dists import install_dist
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.output import said

PLUGIN = '''
from agent_link_core.contribute import command, commands, lazy_handler, registers
from agent_link_core.tools.registry import ToolSpec

agent_link_register_commands = commands(
    command("heavy-report", "agent_link_heavy.heavy:report", "Print the heavy report."),
    command("heavy-wait", "agent_link_heavy.heavy:report", "Wait for the heavy report.", sender=True),
)
agent_link_register_tools = registers([
    ToolSpec("heavy_report", "The heavy report.", {"type": "object", "properties": {}, "additionalProperties": False},
             {"count": {"type": "integer"}}, lazy_handler("agent_link_heavy.heavy:report_tool"), read_only=True),
])
'''
HEAVY = '''
raise ImportError("No module named 'enormous_dependency'")
'''


@pytest.fixture
def site(tmp_path: Path) -> Path:
    install_dist(tmp_path / "site", "agent_link_heavy", {"plugin.py": PLUGIN, "heavy.py": HEAVY}, entry_name="heavy",
                 entry_module="agent_link_heavy.plugin")
    return tmp_path / "site"


def cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(site), AGENT_LINK_LOAD_PLUGINS="heavy", AGENT_LINK_ADDRESS="test:alice")
    return subprocess.run([sys.executable, "-m", "agent_link_core", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def test_a_declared_command_whose_module_fails_breaks_only_itself(site: Path) -> None:
    helped = cli(site, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "heavy-report" in helped.stdout and "Print the heavy report." in helped.stdout
    assert "heavy-wait" in helped.stdout  # looked up to take the sender options: it cannot load, the listing goes on

    ran = cli(site, "heavy-report")
    assert ran.returncode == 1
    lines = said(ran.stderr)
    assert len(lines) == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "'heavy'" in lines[0] and "enormous_dependency" in lines[0] and "AGENT_LINK_DISABLE_PLUGINS=heavy" in lines[0]

    waited = cli(site, "heavy-wait")
    assert waited.returncode == 1 and "Traceback" not in waited.stderr and "enormous_dependency" in waited.stderr, waited.stderr

    sent = cli(site, "send", "test:bob", "still works")  # the core's commands are untouched
    assert sent.returncode == 0, sent.stderr
    health = cli(site, "health", "--json")
    assert health.returncode == 0, health.stderr
    assert "heavy" in json.loads(health.stdout)["plugins"]["loaded"]


@pytest.mark.anyio
async def test_a_declared_tool_whose_module_fails_is_listed_and_answers_an_error(site: Path) -> None:
    env = {"PYTHONPATH": str(site), "AGENT_LINK_LOAD_PLUGINS": "heavy", "AGENT_LINK_ADDRESS": "test:alice"}
    async with agent_link_mcp(env) as client:
        tools = await client.tools()
        assert "heavy_report" in tools and "message_agent" in tools
        result = await client.call("heavy_report")
        assert result["ok"] is False
        assert result["error"]["code"] == "internal_error"
        assert result["error"]["details"] == {"cause": "ImportError"}
        assert "AGENT_LINK_DISABLE_PLUGINS=heavy" in result["error"]["hint"]
        sent = await client.call("message_agent", {"to": "test:bob", "message": "hi"})
        assert sent["ok"] is True, sent
        health = await client.call("agent_link_health")
        assert "heavy" in health["plugins"]["loaded"]
        problems = [p for p in health["plugins"]["problems"] if p["plugin"] == "heavy"]
        assert [p["hook"] for p in problems] == ["tool handler agent_link_heavy.heavy:report_tool"]
        assert not problems[0]["disabled"]


#: modules a plain send or inbox never needs (the MCP SDK, schema validation, tables, the
#: web page, host clients, the hosts' harnesses: declared, built when a command talks to a
#: host; python-ulid, whose import reads package metadata; the process tools; secrets, which
#: only a role file's write uses; getpass, for the web page's login name)
HEAVY_MODULES = ("mcp", "pydantic", "jsonschema", "rich", "jinja2", "starlette", "websockets", "psutil", "filelock",
                 "anyio", "urllib.request", "agent_link_legacy.contract", "agent_link_legacy.state", "agent_link_legacy.engine", "agent_link_core.tools.core_tools", "agent_link_web.server",
                 "agent_link_codex.harness", "agent_link_claude.harness", "agent_link_opencode.harness",
                 "agent_link_filehost.harness", "ulid", "agent_link_hostkit.procs", "agent_link_machines.harness", "shutil", "secrets", "getpass",
                 # the hooks plugins specify (AGENT_LINK_HOOKSPECS): imported when one is called, never for an implementer's load
                 "agent_link_web.hookspecs", "agent_link_legacy.hookspecs", "agent_link_codex.hookspecs")
#: nor does either need an event loop: a send to a plain address awaits no harness
#: (agent_link_core.boundary.run_inline), and nothing in an inbox read is asynchronous
LOOP_MODULES = ("asyncio", "ssl")
#: nor the role table's code (no roles.json in a fresh state dir) nor pathlib (no plugin's
#: load makes a path)
UNUSED_MODULES = ("agent_link_roles.table", "pathlib")
#: the hot commands parse their arguments without click (agent_link_core.cli_run.run_fast);
#: logging is imported only when something is logged (agent_link_core.lazy); the hooks
#: they call are called by the plugins' declared hook tables, without pluggy (agent_link_core.plugins)
CLI_MODULES = ("click", "logging", "pluggy")
#: typing only for type checkers (TYPE_CHECKING imports), SHA-256 without hashlib's OpenSSL
#: (agent_link_core.mailbox.content_hash), unicodedata only for text with a control character
#: (agent_link_core.visible), base64 only for a listing's cursor (agent_link_core.directory),
#: weakref only once a session is looked up (agent_link_core.identity), threading only to start a thread (the boundary
#: keeps to the C module _thread)
STDLIB_MODULES = ("typing", "hashlib", "unicodedata", "base64", "weakref", "threading")
#: an inbox read lists no sessions, sends nothing and checks no health
INBOX_HEAVY_MODULES = ("agent_link_core.directory", "agent_link_core.sending", "agent_link_core.health",
                       "agent_link_core.records", "agent_link_core.harness")
#: a plugin that declares its settings and migrations (AGENT_LINK_SETTINGS, AGENT_LINK_SCHEMA) is
#: not imported for them: these implement no hook a send calls
SETTINGS_ONLY_MODULES = ("agent_link_approvals.plugin", "agent_link_approvals.settings", "agent_link_forks.plugin",
                         "agent_link_forks.schema", "agent_link_legacy.plugin", "agent_link_legacy.schema",
                         "agent_link_search.plugin", "agent_link_search.schema",
                         # a tool and show --thread: neither a send nor an inbox read calls their hooks
                         "agent_link_conversations.plugin", "agent_link_conversations.conversation")
#: nor these, whose hooks a send calls (before_send, before_store, record_event) and an inbox read does not
INBOX_PLUGIN_MODULES = ("agent_link_leases.plugin", "agent_link_leases.schema", "agent_link_receipts.plugin",
                        "agent_link_roles.plugin", "agent_link_web.plugin", "agent_link_core.contribute", "agent_link_loops.plugin",
                        # the host plugins declare their harnesses as data (AGENT_LINK_HARNESSES)
                        "agent_link_codex.plugin", "agent_link_codex.schema", "agent_link_codex.settings",
                        "agent_link_claude.plugin", "agent_link_opencode.plugin", "agent_link_machines.plugin",
                        "agent_link_machines.common", "agent_link_filehost.plugin")


def other_commands(command: str) -> tuple[str, ...]:
    """The modules of every core command but ``command`` (the root group imports a command's
    module only when it runs or a help lists it)."""
    from agent_link_core.cli import CORE_COMMANDS

    own = CORE_COMMANDS[command].partition(":")[0]
    return tuple({t.partition(":")[0] for t in CORE_COMMANDS.values()} - {own, "agent_link_core.cli"})


PROBE = '''
import json, sys
watched = json.loads(sys.argv.pop())
from agent_link_core.entry import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in watched if m in sys.modules)
print("HEAVY=" + json.dumps(heavy), file=sys.stderr)
sys.exit(code)
'''


@pytest.mark.installed_plugins
@pytest.mark.parametrize(("args", "code"), [(("send", "test:bob", "hello {i}"), 0), (("inbox",), 0), (("inbox", "--as", "test:bob"), 1)],
                         ids=["send", "inbox", "inbox-as-unproved"])
def test_send_and_inbox_import_no_heavy_module(tmp_path: Path, args: tuple[str, ...], code: int) -> None:
    """Every installed plugin loads (no AGENT_LINK_LOAD_PLUGINS): what they declare must not
    pull the code behind it into a plain command. The probe runs twice: the first run of a
    new search path scans the entry points (importlib.metadata), the console script's
    later runs read them from the cache (agent_link_core.discovery). Reading as another
    address without proof is refused without starting an event loop."""
    watched = (HEAVY_MODULES + LOOP_MODULES + UNUSED_MODULES + CLI_MODULES + STDLIB_MODULES + other_commands(args[0])
               + SETTINGS_ONLY_MODULES + (INBOX_HEAVY_MODULES + INBOX_PLUGIN_MODULES if args[0] == "inbox" else ()))
    env = {k: v for k, v in os.environ.items() if k != "AGENT_LINK_LOAD_PLUGINS"}
    env["AGENT_LINK_ADDRESS"] = "test:alice"
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    subprocess.run([sys.executable, "-m", "agent_link_core", "send", "test:alice", "so the inbox has mail"],
                   env=dict(env, AGENT_LINK_ADDRESS="test:bob"), check=True, capture_output=True, timeout=120)
    for i in range(2):  # a new text each time: the loop guard refuses a repeated message
        done = subprocess.run([sys.executable, str(probe), *(a.replace("{i}", str(i)) for a in args), json.dumps(watched)], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == code, done.stderr
    heavy = json.loads(done.stderr.rsplit("HEAVY=", 1)[1])
    assert heavy == []


PLAIN_PROBE = '''
import sys
from agent_link_core.entry import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("LOADED=" + ",".join(m for m in ("json", "re") if m in sys.modules))
'''


@pytest.mark.installed_plugins
def test_an_empty_inbox_read_imports_neither_json_nor_re(tmp_path: Path) -> None:
    """Nothing to print and nothing to mark: the read decodes no JSON (the mailbox's reads use json_files.loads) and
    checks the plugins' settings and harness names with string operations, so json, re and enum stay out. Also the
    first run in a new state dir, which imports the entry modules of the plugins with migrations (roles, machines)."""
    env = {k: v for k, v in os.environ.items() if k != "AGENT_LINK_LOAD_PLUGINS"}
    env["AGENT_LINK_ADDRESS"] = "test:nobody"
    probe = tmp_path / "probe.py"
    probe.write_text(PLAIN_PROBE)
    # the first run of a new search path fills the entry-point cache and creates the state dir; the third is the first
    # in another new state dir, with the cache filled
    for state in (env["AGENT_LINK_STATE_DIR"], env["AGENT_LINK_STATE_DIR"], str(tmp_path / "new-state")):
        done = subprocess.run([sys.executable, str(probe), "inbox"], env={**env, "AGENT_LINK_STATE_DIR": state}, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stderr.rsplit("LOADED=", 1)[1] == "", state


@pytest.mark.installed_plugins
def test_every_declared_command_matches_the_command_it_names() -> None:
    """A declaration cannot drift from its command: same name, and the declared help is the
    first paragraph of the real command's help (what the root ``--help`` shortens)."""
    import click

    from agent_link_core.cli import build_cli
    from agent_link_core.lazy_command import LazyCommand

    cli = build_cli()
    ctx = click.Context(cli)
    groups = [cli] + [cli.get_command(ctx, name) for name in ("install", "uninstall")]
    declared = [cmd for group in groups if isinstance(group, click.Group)
                for cmd in (group.get_command(ctx, n) for n in group.list_commands(ctx)) if isinstance(cmd, LazyCommand)]
    assert {c.name for c in declared} >= {"endpoints", "web", "approvals", "receipts", "forks", "claude-peers", "codex", "claude"}
    for lazy in declared:
        real = lazy.load(ctx)
        assert real.name == lazy.name, lazy.target
        first = " ".join((real.help or "").split("\n\n")[0].split())
        assert " ".join((lazy.help or "").split()) == first, lazy.target


@pytest.mark.installed_plugins
def test_every_declared_harness_matches_the_harness_it_builds() -> None:
    """A harness declaration cannot drift from its harness: what the core reads without
    building it (sender options, host variables, ...) is what the built harness says, and the
    harness names no caller when none of its ``caller_variables`` is set and no ``_meta`` came."""
    from agent_link_core.app import App
    from agent_link_core.harness import HarnessDeclaration

    app = App.create()
    try:
        declared = {n: d for n, d in app.harnesses.declared().items() if isinstance(d, HarnessDeclaration)}
        assert {"codex", "claude"} <= set(declared)
        assert app.harnesses.built() == []  # nothing was built to create the App
        for name, declaration in declared.items():
            harness = app.harnesses[name]
            for field in ("session_kind", "host_variables", "host_priority", "sender_options", "caller_arguments"):
                assert getattr(harness, field) == getattr(declaration, field), (name, field)
            env = {k: v for k, v in os.environ.items() if k not in declaration.caller_variables}
            assert harness.identify_caller({}, env) is None, name
    finally:
        app.close()


@pytest.mark.installed_plugins
def test_a_built_harness_is_asked_for_the_caller_only_when_its_declaration_says_it_could(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built (as after a send to its host), a declared harness is still skipped by the caller
    look-up when none of its ``caller_variables`` is set and no ``_meta`` came: the test above
    holds every harness to that promise. With ``_meta`` each is asked."""
    from agent_link_core.app import App
    from agent_link_core.harness import HarnessDeclaration

    probe = App.create()
    variables = {v for d in probe.harnesses.declared().values() if isinstance(d, HarnessDeclaration) for v in d.caller_variables}
    probe.close()
    app = App.create(env={**{k: v for k, v in os.environ.items() if k not in variables}, "AGENT_LINK_ADDRESS": "team:alice"})
    try:
        names = [n for n, d in app.harnesses.declared().items() if isinstance(d, HarnessDeclaration)]
        asked: list[str] = []
        for name in names:
            harness = app.harnesses[name]  # built now
            monkeypatch.setattr(harness, "identify_caller", lambda meta, env, name=name: asked.append(name))
        assert app.caller({}).address == "team:alice" and asked == []
        app.caller({"progressToken": 1})
        assert sorted(asked) == sorted(names)
    finally:
        app.close()


LAZY_HOST = '''
from agent_link_core.harness import HarnessDeclaration

def agent_link_register_harnesses(register):
    register(HarnessDeclaration("lazyhost", "agent_link_lazyhost.host:LazyHost", caller_variables=("LAZYHOST_SESSION",)))
agent_link_register_harnesses.agent_link_impl = True
'''


def test_a_declared_harness_is_built_only_when_used_and_a_failing_one_breaks_only_itself(tmp_path: Path) -> None:
    """The harness's module is imported when a command talks to its host (here: it raises);
    the mailbox keeps working, the failure is the plugin's problem in health, and the
    plugin stays loaded."""
    plugin = LAZY_HOST.replace("agent_link_register_harnesses.agent_link_impl = True\n", "")
    plugin = "from agent_link_core import hookimpl\n" + plugin.replace("def agent_link_register", "@hookimpl\ndef agent_link_register")
    install_dist(tmp_path / "site", "agent_link_lazyhost", {"plugin.py": plugin, "host.py": HEAVY}, entry_name="lazyhost",
                 entry_module="agent_link_lazyhost.plugin")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"), AGENT_LINK_LOAD_PLUGINS="lazyhost",
               AGENT_LINK_ADDRESS="test:alice")

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agent_link_core", *args], capture_output=True, text=True,
                              env={**env, **extra}, timeout=120, check=False)

    plain = run("send", "test:bob", "hello")
    assert plain.returncode == 0 and "lazyhost" not in plain.stderr, plain.stderr  # never built: nothing to report
    assert run("inbox").returncode == 0
    inside = run("inbox", LAZYHOST_SESSION="s1")  # a caller it could name: built, fails, reported; the read goes on
    assert inside.returncode == 0 and "Traceback" not in inside.stderr, inside.stderr
    pushed = run("send", "lazyhost:s1", "hello")  # its recipient: built, fails; the message waits in the mailbox
    assert pushed.returncode == 0 and pushed.stdout.startswith("queued:"), pushed.stdout + pushed.stderr
    health = run("health", "--json")
    assert health.returncode == 1, health.stderr  # its harness is broken: a problem health must report
    assert any(p.get("plugin") == "lazyhost" for p in json.loads(health.stdout)["problems"])
    plugins = json.loads(health.stdout)["plugins"]
    assert "lazyhost" in plugins["loaded"]
    assert any(p["plugin"] == "lazyhost" and p["hook"] == "harness.lazyhost.build" and "enormous_dependency" in p["error"]
               for p in plugins["problems"] + plugins.get("elsewhere", [])), plugins
