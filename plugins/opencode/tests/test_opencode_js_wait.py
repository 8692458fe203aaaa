"""The opencode JS plugin's wait for ``agent-link hook`` (host_plugin/agent-link.js), run in Node
against a stand-in command: a quick answer adds the note to the request; one slower than the
wait adds nothing and opencode goes on, but the command is not killed (the first hook on a fresh
state dir builds the registry the next prompts read), and its late answer finds the pipe closed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_link_opencode.install import stage_plugin
from agent_link_testing.hosts import node_binary

pytestmark = pytest.mark.timeout(120)

#: stands in for `agent-link hook opencode MessagesTransform`: waits DELAY s, then says so in a
#: file, answers a note, and records whether the answer reached the plugin
FAKE = """\
import json, os, sys, time
sys.stdin.read()
time.sleep(float(os.environ["DELAY"]))
marker = os.environ["MARKER"]
open(marker, "w").write("finished")
try:
    print(json.dumps({"note": "agent-link: 1 peer message is waiting"}), flush=True)
    open(marker, "a").write(" answered")
except BrokenPipeError:
    open(marker, "a").write(" refused")
"""

DRIVER = """\
const mod = await import(process.argv[2]);
const hooks = await mod.AgentLinkCaller({ serverUrl: "http://127.0.0.1:1", directory: "/" });
const output = { messages: [{ info: { role: "user", sessionID: "ses_1", id: "msg_1" },
                              parts: [{ id: "prt_1", type: "text", text: "hi" }] }] };
const started = Date.now();
await hooks["experimental.chat.messages.transform"]({}, output);
console.log(JSON.stringify({ waitedMs: Date.now() - started, texts: output.messages[0].parts.map((p) => p.text) }));
"""


def transform(tmp_path: Path, delay_s: float) -> tuple[dict[str, object], Path]:
    """Run the plugin's transform once in Node with the stand-in answering after ``delay_s``;
    what it printed, and the stand-in's marker file."""
    fake = tmp_path / "agent-link"
    fake.write_text(f"#!{sys.executable}\n{FAKE}", encoding="utf-8")
    fake.chmod(0o755)
    plugin = tmp_path / "agent-link.js"
    stage_plugin(plugin, fake)
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER, encoding="utf-8")
    marker = tmp_path / "marker"
    env = dict(os.environ, DELAY=str(delay_s), MARKER=str(marker))
    out = subprocess.run([str(node_binary()), str(driver), plugin.as_uri()], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), marker


def test_a_quick_answer_adds_the_note(tmp_path: Path) -> None:
    printed, marker = transform(tmp_path, 0)
    assert printed["texts"] == ["hi", "agent-link: 1 peer message is waiting"]
    assert marker.read_text() == "finished answered"


def test_a_slow_command_is_left_to_finish_and_its_late_answer_refused(tmp_path: Path) -> None:
    printed, marker = transform(tmp_path, 7)  # the plugin waits 5 s
    assert printed["texts"] == ["hi"]  # opencode went on without a note
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and " " not in (marker.read_text() if marker.exists() else ""):
        time.sleep(0.1)
    assert marker.read_text() == "finished refused"  # not killed; its answer found the pipe closed
