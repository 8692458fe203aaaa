"""``agent-link install opencode`` splices its entries into the config as the person wrote it
(:mod:`agent_link_opencode.jsonedit`), and ``uninstall`` splices them out again: the text
comes back byte for byte even without install's record, and a text the splice cannot follow is
rewritten whole, never wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_link_opencode.install import (ConfigFile, edited, read_file, server_entry, with_agent_link, without_agent_link)

EXE = Path("/opt/agent-link/bin/agent-link")
PLUGIN = Path("/home/me/.local/share/agent-link/host-plugins/opencode/agent-link.js")
OLD = "file:///old/share/agent-link/host-plugins/opencode/agent-link.js"


def install(text: str) -> str:
    data = json.loads(text)
    return edited(ConfigFile(Path("c.json"), text, data, None), with_agent_link(data, EXE, PLUGIN),
                  server=server_entry(EXE), plugin=PLUGIN.as_uri())


def uninstall(text: str) -> str:
    data = json.loads(text)
    return edited(ConfigFile(Path("c.json"), text, data, None), without_agent_link(data), server=None, plugin=None)


@pytest.mark.parametrize("text", [
    '{"a":1}',
    '{"a": 1, "plugin": ["x"]}\n',
    '{\n\t"theme": "x",\n\t"mcp": {\n\t\t"mine": {"type": "remote", "url": "https://e.invalid"}\n\t}\n}\n\n',
    '{\n  "$schema": "https://opencode.ai/config.json",\n  "plugin": [\n    "a",\n    "b"\n  ],\n  "x": [1, 2]\n}\n',
    '{ "username" : "é" }',
    '{\n    "theme": "t",\n    "plugin": ["w"],\n    "mcp": {"mine": {"type": "remote", "url": "https://e.invalid"}}\n}\n',
])
def test_opencode_install_and_uninstall_splice_and_give_the_text_back(text: str) -> None:
    installed = install(text)
    assert json.loads(installed) == with_agent_link(json.loads(text), EXE, PLUGIN)
    assert uninstall(installed) == text
    assert install(installed) == installed


def test_opencode_install_splices_in_the_files_layout() -> None:
    text = '{\n    "theme": "x",\n    "plugin": ["opencode-wakatime"]\n}\n'
    assert install(text).startswith('{\n    "theme": "x",\n    "plugin": ["opencode-wakatime", "file:///home/me/')
    assert '\n    "mcp": {\n        "agent-link": {\n            "type": "local",' in install(text)


def test_opencode_install_replaces_an_earlier_installations_entries_in_place() -> None:
    text = json.dumps({"mcp": {"agent-link": {"type": "local", "command": ["old", "mcp"]}, "mine": {}},
                       "plugin": [OLD, "x"]}, indent=2)
    installed = install(text)
    assert json.loads(installed) == with_agent_link(json.loads(text), EXE, PLUGIN)
    assert OLD not in installed and installed.index('"agent-link"') < installed.index('"mine"')


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '{"mcp": {}, "plugin": []}'])
def test_opencode_a_text_the_splice_cannot_give_exactly_is_rewritten_whole(text: str) -> None:
    installed = install(text)
    assert json.loads(installed) == with_agent_link(json.loads(text), EXE, PLUGIN)
    assert json.loads(uninstall(installed)) == without_agent_link(json.loads(installed))


def test_opencode_install_keeps_an_inline_object_on_its_line() -> None:
    text = '{\n    "theme": "t",\n    "mcp": {"mine": {"enabled": false}}\n}\n'
    assert install(text).startswith('{\n    "theme": "t",\n    "mcp": {"mine": {"enabled": false}, "agent-link": {"type": "local", '
                                    '"command": ["/opt/agent-link/bin/agent-link", "mcp"], ')


@pytest.mark.parametrize("text", ['\ufeff{"a": 1}\n', '\ufeff{"a": 1, "a": 2}'])
def test_opencode_a_byte_order_mark_is_read_past_and_kept(text: str, tmp_path: Path) -> None:
    """opencode reads a config saved with a BOM (Bun drops it): install reads it, keeps the mark
    whether it splices or rewrites the file whole, and uninstall gives the text back."""
    path = tmp_path / "opencode.json"
    path.write_text(text, encoding="utf-8")
    found = read_file(path)
    assert found.problem is None and found.data is not None
    installed = edited(found, with_agent_link(found.data, EXE, PLUGIN), server=server_entry(EXE), plugin=PLUGIN.as_uri())
    assert installed.startswith("\ufeff{") and json.loads(installed[1:]) == with_agent_link(found.data, EXE, PLUGIN)
    path.write_text(installed, encoding="utf-8")
    again = read_file(path)
    assert again.data is not None
    removed = edited(again, without_agent_link(again.data), server=None, plugin=None)
    assert removed.startswith("\ufeff{") and json.loads(removed[1:]) == found.data
