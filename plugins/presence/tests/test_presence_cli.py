"""The presence plugin through the ``agent-link`` command (the core and this plugin alone): a typo'd plain address is
warned with the closest served ones, ``--require-known`` refuses it, and only addresses a send reaches are suggested."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from agent_link_testing.cli_runner import run_core


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_core(*args, plugins=("presence",))


def send_json(*args: str) -> dict[str, Any]:
    proc = run("send", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_typo_address_warns_with_suggestions_and_require_known_refuses() -> None:
    assert run("inbox", "--as", "team:bob").returncode == 0  # team:bob reads its mail: it is present

    typo = run("send", "team:bobb", "hello", "--from", "team:alice")
    assert typo.returncode == 0 and typo.stdout.startswith("queued:")
    assert "did you mean team:bob?" in typo.stderr.lower()
    data = send_json("tema:bob", "hello", "--from", "team:alice")
    assert [w["details"]["suggestions"] for w in data["warnings"]] == [["team:bob"]]

    refused = run("send", "team:bobb", "hello", "--from", "team:alice", "--require-known")
    assert refused.returncode == 1 and refused.stdout.startswith("rejected:")
    assert "--require-known" in refused.stderr and "requireKnown" not in refused.stderr and "team:bob" in refused.stderr
    assert "warnings" not in send_json("team:bob", "hi", "--from", "team:alice", "--require-known")


def test_suggestions_are_only_addresses_a_send_reaches() -> None:
    """An address that only ever signed mail (``--from``) was never read by anyone: suggesting it
    would send the message where nobody looks. Only served addresses are suggested."""
    assert run("inbox", "--as", "team:bob").returncode == 0
    send_json("team:bob", "from a script", "--from", "team:bobby")  # team:bobby only ever sent
    data = send_json("team:bobb", "hello", "--from", "team:alice")
    assert [w["details"]["suggestions"] for w in data["warnings"]] == [["team:bob"]]
    alone = send_json("ops:bobby", "hello", "--from", "team:alice")  # right id, wrong harness: nothing served matches
    assert [w["details"]["suggestions"] for w in alone["warnings"]] == [[]]
    refused = run("send", "team:bobbyy", "x", "--from", "team:alice", "--require-known", "--json")
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"]["details"]["candidates"] == [{"address": "team:bob"}]


def test_an_id_that_is_no_address_is_pointed_to_a_served_address() -> None:
    done = run("send", "teambob", "hi", "--from", "team:alice", "--json")
    assert done.returncode == 1 and "Did you mean" not in json.loads(done.stdout)["error"]["hint"]
    assert run("inbox", "--as", "team:bob").returncode == 0  # team:bob is served from now on
    done = run("send", "teambob", "hi", "--from", "team:alice")
    stderr = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Did you mean team:bob? An address is harness:id" in stderr
