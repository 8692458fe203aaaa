"""The hot commands' fast path (agent_link_core.cli_run.run_fast, no click) and click's path
(the command agent_link_core.cli.click_command builds from the same declaration) behave
alike: same stdout, same stderr, same exit code, for good input and for bad input (a usage
error and a refusal each in one line). What the fast parser does not take as it stands goes
to click untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_link_core import cli_run
from agent_link_testing.cli_identity import named_address_env
from agent_link_testing.cli_runner import run_click, seed
from agent_link_testing.output import masked



def fast(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[bool, int, str, str]:
    """Run ``argv`` on the fast path: (taken, exit code, stdout, stderr)."""
    capsys.readouterr()
    code = 0
    try:
        taken = cli_run.guarded(lambda: cli_run.run_fast(argv))
    except SystemExit as exc:
        taken, code = True, exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return bool(taken), code, out, err


def slow(argv: list[str]) -> tuple[int, str, str]:
    """Run ``argv`` through click as the console script does when the fast path declines."""
    return run_click(*argv, env=named_address_env(argv))


@pytest.fixture
def mail(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "test:bob")
    return {"mid": seed(), "sent": seed(to="test:carol")}


READS = [
    ["inbox", "--peek"], ["inbox", "--peek", "--json"], ["inbox", "--peek", "--ndjson", "--limit=5"],
    ["inbox", "--peek", "--envelope"], ["inbox", "--peek", "--all", "--limit", "3"],
    ["status", "{mid}"], ["status", "{mid}", "--json"], ["show", "{mid}"], ["show", "{mid}", "--json"],
]
REFUSED = [
    ["inbox", "--offset", "3"],  # a usage error the command finds: click's three lines, exit 2
    ["inbox", "--message-id", "{mid}", "--all"],
    ["inbox", "--as", "not an address"],  # a refusal: one line
    ["status", "nope"], ["show", "01J00000000000000000000000"],
    ["reply", "{mid}", "x", "--decline", "--done"],
    ["reply", "{sent}", "not mine"],
    ["send", "", "hi"], ["send", "test:carol", "hi", "--from", " "], ["send", "bad address!", "hi"],
    ["send", "test:carol", "hi", "--reply-by", "tomorrow"],
]
LEFT_TO_CLICK = [
    ["inbox", "--help"], ["inbox", "--limit", "0"], ["inbox", "--limit", "x"], ["inbox", "--bogus"], ["inbox", "extra"],
    ["inbox", "--peek=yes"], ["inbox", "--as"], ["inbox", "--as", "--peek"], ["send"], ["send", "a", "b", "c"],
    ["send", "test:carol", "hi", "--retry-backoff", "nan"], ["send", "test:carol", "hi", "--anticipation", "maybe"],
    ["send", "test:carol", "--file", "."], ["reply"], ["status", "-x"],
    ["show", "--thread", "{mid}"],  # the conversations plugin's option (click's path, which loads the plugins)
    ["send", "test:carol", "hi", "--wait"], ["send", "test:carol", "hi", "--timeout-ms", "5"],  # the waits plugin's (plugins/waits)
]


def filled(argv: list[str], mail: dict[str, Any]) -> list[str]:
    return [a.format(**mail) for a in argv]


@pytest.mark.parametrize("argv", READS + REFUSED, ids=lambda a: " ".join(a))
def test_both_paths_print_and_exit_alike(argv: list[str], mail: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    argv = filled(argv, mail)
    taken, code, out, err = fast(argv, capsys)
    assert taken
    slow_code, slow_out, slow_err = slow(argv)
    assert (code, masked(out), masked(err)) == (slow_code, masked(slow_out), masked(slow_err))


@pytest.mark.parametrize("argv", LEFT_TO_CLICK, ids=lambda a: " ".join(a))
def test_what_the_fast_parser_does_not_take_goes_to_click(argv: list[str], mail: dict[str, Any],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    taken, code, out, err = fast(filled(argv, mail), capsys)
    assert (taken, code, out, err) == (False, 0, "", "")


def test_a_usage_error_is_one_line(mail: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    _, code, _, err = fast(["inbox", "--offset", "3"], capsys)
    assert code == 2
    assert err == "agent-link inbox: --offset needs --message-id (see 'agent-link inbox --help')\n"


def test_sends_and_replies_alike(mail: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["send", "test:carol", "hi {n}"], ["send", "test:carol", "hi {n}", "--json", "--correlation-id", "c"],
                 ["send", "test:carol", "--ttl-ms", "5000", "--retry-count", "2", "--retry-backoff", "1.5", "--", "-{n}-"]):
        _, code, out, err = fast([a.replace("{n}", "fast") for a in argv], capsys)
        assert (code, masked(out).replace("fast", "N"), err) == \
            (lambda r: (r[0], masked(r[1]).replace("slow", "N"), r[2]))(slow([a.replace("{n}", "slow") for a in argv]))
    first = seed(body="one")
    second = seed(body="two")
    _, code, out, err = fast(["reply", first, "fine", "--done"], capsys)
    slow_code, slow_out, slow_err = slow(["reply", second, "fine", "--done"])
    assert (code, masked(out), err) == (slow_code, masked(slow_out), slow_err)
    assert code == 0 and out.startswith("done: ")


@pytest.mark.installed_plugins
def test_a_harness_sender_option_is_parsed_on_the_fast_path(mail: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Sender options come from the harnesses' declarations (Codex's ``--from-thread``), on both paths; given
    with ``--from`` they name the sender twice, a usage error that stores nothing."""
    argv = ["send", "test:carol", "hi", "--from-thread", "not-a-thread", "--from", "test:bob"]
    taken, code, out, err = fast(argv, capsys)
    assert taken and code == 2 and "--from and --from-thread name the sender twice" in err
    slow_code, slow_out, slow_err = slow(argv)
    assert (code, masked(out), err) == (slow_code, masked(slow_out), slow_err)
    assert fast(["send", "test:carol", "hi", "--from", "test:bob"], capsys)[1] == 0
