"""The plugin guide's hook table is the plugin manager's hooks (names and arguments in order), each
row links a real implementation, no other document keeps a hook table of its own, and
``agent-link plugins --json`` lists each plugin's hooks with their timings."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pluggy
import pytest
from click.testing import CliRunner

from agent_link_core import hookimpl, hookspecs
from agent_link_core.lazy import PROJECT
from agent_link_core.app import App
from agent_link_core.records import Event

REPO = Path(__file__).resolve().parents[1]
HEADER = "| hook | called | answer | on failure | example |"
ROW = re.compile(r"^\| `(agent_link_\w+)\(([^)]*)\)` \|")


def documented() -> dict[str, list[str]]:
    """``{hook: [argument, ...]}`` from the table of docs/plugins.md, in table order."""
    lines = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER)
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        match = ROW.match(line)
        assert match, f"a row of the hook table that names no hook: {line}"
        assert match.group(1) not in rows, f"{match.group(1)} is in the table twice"
        rows[match.group(1)] = [a.strip() for a in match.group(2).split(",") if a.strip()]
    return rows


def plugin_specs() -> dict[str, str]:
    """``{hook: hookspecs module}`` of the hooks this repository's plugins specify (their ``AGENT_LINK_HOOKSPECS``)."""
    found: dict[str, str] = {}
    for package in sorted(REPO.glob("plugins/*/agent_link_*/__init__.py")):
        table = getattr(importlib.import_module(package.parent.name), "AGENT_LINK_HOOKSPECS", None) or {}
        found.update({hook: module for module, hooks in table.items() for hook in hooks})
    return found


def manager() -> pluggy.PluginManager:
    """pluggy's manager of the core's hookspecs and every plugin's."""
    pm = pluggy.PluginManager(PROJECT)
    for module in (hookspecs, *map(importlib.import_module, sorted(set(plugin_specs().values())))):
        pm.add_hookspecs(module)
    return pm


def specified() -> dict[str, list[str]]:
    return {name: list(caller.spec.argnames) for name, caller in vars(manager().hook).items()
            if name.startswith("agent_link_") and caller.spec is not None}


def test_the_hook_table_is_the_plugin_managers_hooks_with_their_arguments() -> None:
    table, specs = documented(), specified()
    assert sorted(table) == sorted(specs), (
        f"missing from docs/plugins.md: {sorted(set(specs) - set(table))}; not hooks: {sorted(set(table) - set(specs))}")
    wrong = {name: (table[name], specs[name]) for name in specs if table[name] != specs[name]}
    assert not wrong, f"arguments in the table differ from hookspecs.py (table, spec): {wrong}"


def test_the_hook_table_says_which_hooks_are_firstresult() -> None:
    """The table's "called" column starts with ``firstresult`` exactly for the firstresult specs
    (hookspecs.py keeps the shapes, the table when a hook is called and how its failure ends)."""
    lines = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines[lines.index(HEADER) + 2:] if ROW.match(line)]
    table = sorted(m.group(1) for line in rows if (m := ROW.match(line)) and line.split(" | ")[1].startswith("firstresult"))
    specs = sorted(name for name, caller in vars(manager().hook).items()
                   if name.startswith("agent_link_") and caller.spec is not None and caller.spec.opts.get("firstresult"))
    assert len(specs) >= 5
    assert table == specs


def test_the_hook_table_names_the_plugin_that_specifies_a_hook() -> None:
    """One rule for a hook a plugin specifies (docs/plugins.md, section 3): it is documented in its plugin's hookspecs
    module, like the core's in hookspecs.py, and has its row in the one hook table, whose "called" column names that
    module; a row of the core's hooks names none."""
    lines = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8").splitlines()
    called = {m.group(1): line.split(" | ")[1] for line in lines[lines.index(HEADER) + 2:] if (m := ROW.match(line))}
    declared = plugin_specs()
    assert {"agent_link_register_panels", "agent_link_register_legacy_importers", "agent_link_check_override"} <= set(declared)
    for hook, column in called.items():
        if hook in declared:
            assert f"specified by `{declared[hook]}`" in column, f"{hook}'s row must say: specified by `{declared[hook]}`"
        else:
            assert "specified by" not in column, f"{hook} is the core's (agent_link_core/hookspecs.py)"
    for hook, module in declared.items():
        doc = inspect.getdoc(getattr(importlib.import_module(module), hook)) or ""
        assert "Called" in doc and "optionalhook=True" in doc, f"{module}.{hook} must say when it is called and how to implement it"
        for param in inspect.signature(getattr(importlib.import_module(module), hook)).parameters:
            assert f":param {param}:" in doc, f"{module}.{hook} must document {param}"


def test_each_row_of_the_hook_table_links_a_plugin_that_implements_the_hook() -> None:
    """The "example" column links a module of this repository's plugins or examples that defines the hook at its top level
    (a function, or a name bound to one), so the example cannot drift from the code."""
    docs = REPO / "docs"
    lines = (docs / "plugins.md").read_text(encoding="utf-8").splitlines()
    rows = {m.group(1): line for line in lines[lines.index(HEADER) + 2:] if (m := ROW.match(line))}
    assert len(rows) >= 30
    for hook, line in rows.items():
        links = re.findall(r"\]\(([^)]+\.py)\)", line.rstrip(" |").rsplit(" | ", 1)[1])
        assert links, f"{hook}'s row links no example implementation"
        for link in links:
            path = (docs / link).resolve()
            assert path.is_relative_to(REPO) and path.parts[len(REPO.parts)] in ("plugins", "examples"), f"{hook}: {link}"
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
            names |= {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
            assert hook in names, f"{link} (the example of {hook}) does not define it"


def test_no_other_document_keeps_a_hook_table() -> None:
    files = subprocess.run(["git", "ls-files", "*.md"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    others = [f"{name}: {line}" for name in files if name != "docs/plugins.md"
              for line in (REPO / name).read_text(encoding="utf-8").splitlines() if ROW.match(line)]
    assert not others, "hook rows outside docs/plugins.md (link to its table instead):\n" + "\n".join(others)


@pytest.mark.anyio
async def test_plugins_json_lists_each_plugins_hooks_and_their_timings(monkeypatch: pytest.MonkeyPatch) -> None:
    class Watcher:
        @hookimpl
        def agent_link_on_event(self, event: Any) -> None:
            return None

        @hookimpl
        def agent_link_health(self) -> tuple[str, dict[str, Any]]:
            return "watcher", {"ok": True}

    from agent_link_core import cli as cli_mod
    from agent_link_testing.cli_plugins import use_app_in_cli

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    app = App.create(extra_plugins=(("watcher", Watcher()),))
    try:
        app.hooks.call("agent_link_on_event", event=Event("sent", None, 1))
        use_app_in_cli(monkeypatch, app)
        result = CliRunner().invoke(cli_mod.build_cli(), ["plugins", "--json"])
        assert result.exit_code == 0, result.output
        hooks = json.loads(result.output)["hooks"]
        assert set(hooks["watcher"]) >= {"agent_link_on_event", "agent_link_health", "load"}
        assert hooks["watcher"]["agent_link_on_event"]["calls"] == 1
        assert set(hooks["watcher"]["agent_link_on_event"]) == {"calls", "lastMs", "maxMs"}
        assert hooks["watcher"]["agent_link_health"] is None  # implemented, not called in that process
        assert "agent_link_register_tools" in hooks["agent_link_core.default_plugins"]
    finally:
        await app.aclose()
