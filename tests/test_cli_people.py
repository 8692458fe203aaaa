"""The ``agent-link`` command as people and scripts use it, as the console script runs it
(:func:`agent_link_testing.cli_runner.run_main`: the fast path, then click, in this process;
the real console script in a subprocess where the process itself is what is tested: signals,
argument bytes, and a sample of each kind of exit): mistakes caught (typos, case,
malformed input, CLI-worded errors, bodies from stdin and files), mail readable
(terminal-safe human output, --all) and the script
contract (exit codes, versioned JSON). The listings plugin's commands (sessions, who, find,
contacts, watch): plugins/listings/tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.envelope import MAX_BODY_BYTES
from agent_link_testing.cli_runner import AGENT_LINK, RUN_BOUND_S, core_process, installed_plugins, run_core
from agent_link_testing.output import said_text

ALL_PLUGINS = installed_plugins()
BUT_WAITS = " ".join(name for name in ALL_PLUGINS.split() if name != "waits")  # for a test of a wait (plugins/waits)
UNKNOWN_ID = "01HZY8D3J5Q7K9M2N4P6R8T0VW"
# run: as the console script runs it, in this process, with every plugin disabled (the core
# alone), as the address --as / --from names (a script of that agent); process: the same in a
# real agent-link process (its exit status, its stdio bytes)
run = run_core
process = core_process


def ctrl_c_works() -> None:
    """In the child before exec: SIGINT as a terminal's Ctrl-C delivers it. A suite started in
    the background of a shell without job control inherits SIGINT ignored, and Python then
    never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert "failed unexpectedly" not in proc.stderr, proc.stderr


def send_json(*args: str, stdin: bytes | None = None) -> dict[str, Any]:
    proc = run("send", *args, "--json", stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# -- mistakes caught ---------------------------------------------------------------------


def test_without_a_plugin_that_records_served_addresses_require_known_refuses_every_plain_address() -> None:
    """No plugin knows which plain addresses are served (the presence plugin's tests: plugins/presence/tests): a send
    carries no unknown_address warning, and --require-known refuses the address, saying why and what to install."""
    assert run("inbox", "--as", "team:bob").returncode == 0
    assert "warnings" not in send_json("team:bobb", "hello", "--from", "team:alice")
    refused = run("send", "team:bob", "hello", "--from", "team:alice", "--require-known", "--json")
    assert refused.returncode == 1, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert (error["code"], error["details"]) == ("not_found", {"query": "team:bob", "candidates": []})
    assert "agent-link-presence" in error["hint"], error
    said = run("send", "team:bob", "hello", "--from", "team:alice", "--require-known")
    assert said.returncode == 1 and "--require-known cannot accept team:bob" in said.stderr and "requireKnown" not in said.stderr


@pytest.mark.installed_plugins("waits")
def test_ids_are_case_insensitive_in_every_command() -> None:
    mid = send_json("team:bob", "answer me", "--from", "team:alice", "--anticipation", "reply")["messageId"]
    low = mid.lower()
    status = run("status", low, "--from", "team:alice", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["messageId"] == mid
    replied = run("reply", low, "done it", "--from", "team:bob", "--json")
    assert replied.returncode == 0, replied.stderr
    assert json.loads(replied.stdout)["replyToMessageId"] == mid
    waited = run("wait", low, "--from", "team:alice", "--timeout-ms", "0", "--json")
    assert waited.returncode == 0 and json.loads(waited.stdout)["outcome"] == "reply"


BAD_IDS = ["", "not-an-id", "01HZY8D3J5Q7K9M2N4P6R8T0VU", UNKNOWN_ID.lower(), "../../etc/passwd", "é" * 26]
BAD_ADDRESSES = ["Team:bob", "team:", ":bob", "team bob", "team:" + "b" * 200, "role:BAD", "a" * 40 + ":x"]
# Each command meets each kind of bad id / address at least once (the rotation keeps the
# number of processes down; every value is used by several commands).
BAD_INPUT = [
    *[("reply", i, "text", "--from", "team:bob") for i in BAD_IDS],
    *[("status", i, "--from", "team:alice") for i in BAD_IDS[::2]],
    *[("wait", i, "--from", "team:alice", "--timeout-ms", "0") for i in BAD_IDS[1::2]],
    *[("send", a, "text", "--from", "team:alice") for a in BAD_ADDRESSES],
    *[("send", "team:bob", "text", "--from", a) for a in BAD_ADDRESSES[::2]],
    *[("inbox", "--as", a) for a in BAD_ADDRESSES[1::2]],
    *[("show", i, "--from", "team:alice") for i in BAD_IDS[::2]],
    ("send", "team:bob", "x", "--message-id", "nope", "--from", "team:alice"),
    ("send", "team:bob", "x", "--ttl-ms", "0"), ("send", "team:bob", "x", "--anticipation", "maybe"),
    ("send", "team:bob", "x", "--reply-by", "tomorrow"), ("send", "team:bob", "x", "--reply-by", "2020-01-01T00:00:00Z"),
    ("send", "team:bob", "x", "--reply-by", "2030-01-01T00:00:00"), ("send", "team:bob", "x", "--timeout-ms", "-5"),
    ("send", "team:bob", "x", "--file", "/nonexistent/file"), ("send", "team:bob"), ("send", "team:bob", "   "),
    ("send", "team:bob", "x", "--wait", "--anticipation", "fyi"), ("send", "team:bob", "x", "--bogus"),
    ("reply", UNKNOWN_ID, "--decline", "--done", "--from", "team:bob"), ("reply", UNKNOWN_ID, "--from", "team:bob"),
    ("wait", UNKNOWN_ID, "--timeout-ms", "600001"), ("inbox", "--limit", "0"), ("inbox",),
    ("nosuchcommand",),
]


# one of each kind of ending, also in a real process (with its exit status): a refusal (1), a
# usage error in agent-link's one line (2), click's usage error (2), an unknown command (2)
BAD_INPUT_IN_A_PROCESS = {("reply", UNKNOWN_ID.lower(), "text", "--from", "team:bob"): 1,
                          ("send", "team:bob", "x", "--reply-by", "tomorrow"): 2, ("send", "team:bob", "x", "--bogus"): 2,
                          ("nosuchcommand",): 2}


def test_bad_input_gets_one_line_never_a_traceback() -> None:
    """Every command, fed malformed ids, addresses and options: a non-zero exit and a last
    stderr line from agent-link (or click's usage error), never a traceback."""
    assert set(BAD_INPUT_IN_A_PROCESS) <= set(BAD_INPUT)
    results = [(args, run(*args)) for args in BAD_INPUT]
    in_a_process = [(args, process(*args)) for args in BAD_INPUT_IN_A_PROCESS]
    for args, proc in in_a_process:
        assert proc.returncode == BAD_INPUT_IN_A_PROCESS[args] == dict(results)[args].returncode, (args, proc.stderr)
    results += in_a_process
    for args, proc in results:
        no_traceback(proc)
        assert proc.returncode != 0, (args, proc.stdout)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("agent-link"), (args, proc.stderr)
        assert not any(line.startswith(("Usage:", "Try ", "Error:")) for line in lines), (args, proc.stderr)  # click's four lines


def test_errors_speak_the_cli_language() -> None:
    date = run("send", "team:bob", "x", "--from", "team:alice", "--reply-by", "tomorrow")
    assert date.returncode == 2
    assert date.stderr.startswith("agent-link send: --reply-by: expected ISO 8601") and "replyBy" not in date.stderr
    assert "fyi" not in date.stderr  # the format is the first thing to fix, not the labels
    upper = run("send", "Team:bob", "x", "--from", "team:alice")
    assert upper.returncode == 2 and "harness names are lower case" in upper.stderr and "team:bob" in upper.stderr
    for bad in (("--from", ""), ("--retry-backoff", "nan"), ("--message-id", "8" + "Z" * 25)):  # 8Z…: over 128 bits
        refused = run("send", "team:bob", "x", "--from", "team:alice", *bad)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, (bad, refused.stderr)
    # no target, an address without its id or its harness, and an address's shape that is none
    for target in ("", "team:", ":bob", "team:bob:extra", "Team:"):
        empty = run("send", target, "x", "--from", "team:alice")
        assert empty.returncode == 2 and "No session has the id" not in empty.stderr, empty.stderr
    as_upper = run("inbox", "--as", "Team:bob")
    assert "--as: expected team:bob (harness names are lower case)" in as_upper.stderr
    missing = run("status", UNKNOWN_ID, "--from", "team:alice")
    assert missing.returncode == 1 and "`agent-link inbox`" in missing.stderr
    assert "read_agent_link_inbox" not in missing.stderr and "agent_link_mailbox_inspect" not in missing.stderr
    bad_id = run("send", "team:bob", "x", "--message-id", "nope", "--from", "team:alice")
    assert "--message-id" in bad_id.stderr and "messageId" not in bad_id.stderr
    mid = send_json("team:bob", "question", "--from", "team:alice", "--anticipation", "reply")["messageId"]
    empty = run("reply", mid, "--from", "team:bob")
    assert empty.returncode == 2 and "agent-link reply: TEXT: expected" in empty.stderr


def test_body_from_stdin_and_file_within_the_limit(tmp_path: Path) -> None:
    data = send_json("team:bob", "-", "--from", "team:alice", stdin="from stdin ✓\n".encode())
    note = tmp_path / "note.txt"
    note.write_text("from a file\nsecond line", encoding="utf-8")
    data2 = send_json("team:bob", "--file", str(note), "--from", "team:alice")
    inbox = json.loads(run("inbox", "--as", "team:bob", "--json").stdout)
    assert {m["id"] for m in inbox["messages"]} == {data["messageId"], data2["messageId"]}
    human = run("inbox", "--as", "team:bob", "--all").stdout
    assert "from stdin ✓" in human and "  second line" in human

    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * (MAX_BODY_BYTES + 1))
    # one refusal, said the same way wherever the text comes from (TEXT was "rejected: nothing sent" with other words)
    for source, proc in (("the file", run("send", "team:bob", "--file", str(big), "--from", "team:alice")),
                         ("stdin", run("send", "team:bob", "-", "--from", "team:alice", stdin=b"a" * (MAX_BODY_BYTES + 5000))),
                         ("TEXT", run("send", "team:bob", "é" * (MAX_BODY_BYTES // 2 + 1), "--from", "team:alice"))):
        assert proc.returncode == 1 and proc.stdout == "", proc.stdout
        assert proc.stderr.startswith(f"agent-link: The message from {source} is over the limit of {MAX_BODY_BYTES} bytes (UTF-8)."), proc.stderr
        no_traceback(proc)
    assert send_json("team:bob", "a" * MAX_BODY_BYTES, "--from", "team:alice")["outcome"] == "queued"
    big.write_bytes(b"a" * MAX_BODY_BYTES)
    assert send_json("team:bob", "--file", str(big), "--from", "team:alice")["outcome"] == "queued"
    both = run("send", "team:bob", "text", "--file", str(note))
    assert both.returncode == 2 and "exactly one of TEXT" in both.stderr
    not_utf8 = process("send", "team:bob", "-", "--from", "team:alice", stdin=b"\xff\xfe bad")
    assert not_utf8.returncode == 2 and "UTF-8" in not_utf8.stderr
    # the same bytes as the TEXT argument (os.fsdecode keeps them as the process receives them)
    argv_bytes = process("send", "team:bob", os.fsdecode(b"ab\xffcd"), "--from", "team:alice")
    assert argv_bytes.returncode == 2 and "UTF-8" in argv_bytes.stderr, argv_bytes.stderr
    # and from --file: refused with the offset, nothing queued (the whole message, not escapes)
    (tmp_path / "latin").write_bytes(b"ab\xff\xfecd")
    from_file = run("send", "team:bob", "--file", str(tmp_path / "latin"), "--from", "team:alice")
    assert from_file.returncode == 2 and "invalid byte at offset 2" in from_file.stderr, from_file.stderr
    assert len(from_file.stderr.strip().splitlines()) == 1


NOT_UTF8 = os.fsdecode(b"x\xffy")  # as Python hands the process such bytes (PEP 383)


@pytest.mark.parametrize(("plugin", "args"), [
    ("leases", ("lease", NOT_UTF8)), ("", ("send", "team:bob", "hi", "--label", NOT_UTF8)), ("search", ("search", NOT_UTF8)),
    ("settings", ("config", "set", "state_dir", "/tmp/" + NOT_UTF8)), ("forks", ("forks", "show", NOT_UTF8)),
], ids=["lease", "option", "search", "config", "plugin-command"])
def test_an_argument_that_is_not_utf8_is_one_line_whatever_the_command(plugin: str, args: tuple[str, ...]) -> None:
    proc = process(*args, env={"AGENT_LINK_ADDRESS": "team:alice", "AGENT_LINK_LOAD_PLUGINS": plugin}, plugins=(plugin,))
    no_traceback(proc)
    # config set: the value is refused by the setting's own rule, exit 1 as every refused value there
    assert proc.returncode == (1 if plugin == "settings" else 2), proc.stderr
    assert proc.stderr.count("\n") == 1 and "x\\xffy" in proc.stderr and "not UTF-8" in proc.stderr, proc.stderr


# -- mail readable -----------------------------------------------------------------------


@pytest.mark.installed_plugins("budgets")
def test_inbox_reads_large_mail_in_pages() -> None:
    """The CLI reads like read_agent_link_inbox (with the budgets plugin): at most AGENT_LINK_READ_BYTES, one large
    message in pages (--message-id, --offset), delivered with its last page."""
    body = "".join(f"{n:06d} page me\n" for n in range(4_000))  # 60 000 bytes
    mid = send_json("team:bob", "-", "--from", "team:alice", stdin=body.encode())["messageId"]
    first = json.loads(run("inbox", "--as", "team:bob", "--json").stdout)
    assert first["page"]["messageId"] == mid and first["page"]["nextOffset"] and first["markedDelivered"] == []
    assert len(first["renderedBlock"]) < 40_000
    human = run("inbox", "--as", "team:bob", "--peek")
    assert human.returncode == 0 and f"message {mid}, characters 0-" in human.stdout
    assert f"agent-link inbox --as team:bob --message-id {mid} --offset {first['page']['nextOffset']}" in human.stdout
    parts, page = [first["renderedBlock"]], first["page"]
    while page["nextOffset"] is not None:
        data = json.loads(run("inbox", "--as", "team:bob", "--message-id", mid.lower(), "--offset", str(page["nextOffset"]), "--json").stdout)
        parts.append(data["renderedBlock"])
        page = data["page"]
    assert data["markedDelivered"] == [mid] and body in "".join(parts)
    assert json.loads(run("status", mid, "--from", "team:alice", "--json").stdout)["delivery"] == "delivered"
    # the last page says what other mail waits, as a whole read does
    small = send_json("team:bob", "and a short one", "--from", "team:alice")["messageId"]
    last = run("inbox", "--as", "team:bob", "--message-id", mid, "--offset", str(page["offset"]))
    assert "1 more message(s) wait: run agent-link inbox --as team:bob again." in last.stdout, last.stdout
    assert json.loads(run("inbox", "--as", "team:bob", "--json").stdout)["markedDelivered"] == [small]
    # Mistakes: an offset alone, past the end, a bad id; each one line, exit 2.
    for args, says in ((("--offset", "5"), "--offset needs --message-id"),
                       (("--message-id", mid, "--offset", str(page["totalChars"])), "--offset"),
                       (("--message-id", "not-an-id"), "--message-id")):
        proc = run("inbox", "--as", "team:bob", *args)
        assert proc.returncode == 2 and says in proc.stderr, (args, proc.stderr)
        no_traceback(proc)



HOSTILE = "look \x1b[2J\x1b[31mred\x1b[0m \x1b]0;title\x07 \u202eevil\u202c \x9b31m end"


@pytest.mark.installed_plugins("waits")
def test_human_mail_is_safe_for_a_terminal_and_machine_forms_stay() -> None:
    mid = send_json("team:bob", HOSTILE, "--from", "team:alice", "--anticipation", "reply")["messageId"]
    human = run("inbox", "--as", "team:bob", "--peek")
    assert human.returncode == 0
    for raw in ("\x1b", "\x07", "\u202e", "\x9b"):
        assert raw not in human.stdout
    assert "\\u{001B}[2J" in human.stdout and "\\u{202E}evil" in human.stdout
    head = human.stdout.split("\n\n")[0]
    assert f"message {mid}" in head and "from:    team:alice" in head and "sent:    " in head
    assert "delivery: queued\n  status:  pending\n" in head and "expects: reply" in head
    envelope = run("inbox", "--as", "team:bob", "--peek", "--envelope").stdout
    assert "<agent-link-message" in envelope and "\x1b" not in envelope
    machine = json.loads(run("inbox", "--as", "team:bob", "--json").stdout)
    assert machine["version"] == 1 and machine["messages"][0]["id"] == mid and "<agent-link-message" in machine["renderedBlock"]

    # A read message stays reachable: --all lists it, wait shows the reply for people.
    assert "No open messages" not in run("inbox", "--as", "team:bob", "--all").stdout
    assert run("reply", mid, "fine \x1b[5m", "--from", "team:bob").returncode == 0
    waited = run("wait", mid, "--from", "team:alice", "--timeout-ms", "0")
    assert waited.returncode == 0 and waited.stdout.startswith("reply after")
    answered_at = json.loads(run("status", mid, "--from", "team:alice", "--json").stdout)["resolution"]["at"]
    assert waited.stdout.splitlines()[0].endswith(f" ms (answered {answered_at})")  # an answer older than the wait says so
    assert "\x1b" not in waited.stdout and "fine \\u{001B}[5m" in waited.stdout
    assert "No open messages" in run("inbox", "--as", "team:bob").stdout
    everything = json.loads(run("inbox", "--as", "team:bob", "--all", "--json").stdout)
    assert [m["id"] for m in everything["messages"]] == [mid] and everything["messages"][0]["status"] == "replied"
    # a listing, not a read: none of a read's paging fields
    assert sorted(everything) == ["address", "markedDelivered", "messages", "nextBefore", "openCount", "remainingCount",
                                  "renderedBlock", "version"]


def test_require_delivered_has_its_own_exit_code() -> None:  # wait's and send --wait's: plugins/waits/tests
    undelivered = process("send", "team:bob", "x", "--from", "team:alice", "--require-delivered")
    assert undelivered.returncode == 7 and "not delivered (queued; --require-delivered)" in undelivered.stderr


# -- scripts -----------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("inbox", "--as", "team:bob"), ("plugins",), ("health",),
])
def test_every_json_is_one_versioned_object_and_ndjson_is_one_line(args: tuple[str, ...]) -> None:
    pretty = run(*args, "--json")
    assert pretty.returncode == 0, pretty.stderr
    assert "version" in json.loads(pretty.stdout)
    line = run(*args, "--ndjson")
    assert line.returncode == 0 and line.stdout.count("\n") == 1, line.stdout
    assert json.loads(line.stdout).keys() == json.loads(pretty.stdout).keys()


def test_intercom_style_ids_and_the_idempotency_fingerprint() -> None:
    uid = "16E66E8A-008C-4F09-86D7-DCAEF30C7D36"
    base = ("team:bob", "Please review the report.", "--from", "team:alice", "--message-id", uid, "--ttl-ms", "300000",
            "--correlation-id", "job-7", "--from-project", "reports", "--label", "reviewer")
    first = send_json(*base)
    assert first["clientMessageId"] == uid.lower() and first["correlationId"] == "job-7" and not first["duplicate"]
    again = send_json(*base)
    assert again["duplicate"] and again["messageId"] == first["messageId"]
    # The UUID finds the message wherever an id is taken.
    status = json.loads(run("status", uid.lower(), "--from", "team:alice", "--json").stdout)
    assert status["messageId"] == first["messageId"] and status["senderProject"] == "reports"
    changed = {  # each refusal names the field that differs
        "message": ("team:bob", "Other text", *base[2:]),
        "ttlMs": (*base[:7], "1000", *base[8:]),
        "correlationId": (*base[:9], "job-8", *base[10:]),
        "senderProject": (*base[:11], "other", *base[12:]),
        "senderLabel": (*base[:13], "boss"),
        "to": ("team:carol", *base[1:]),
        "from": (*base[:3], "team:eve", *base[4:]),
        "anticipation": (*base, "--anticipation", "reply"),
    }
    for what, args in changed.items():
        proc = run("send", *args, "--json")
        assert proc.returncode == 1, what
        data = json.loads(proc.stdout)
        assert data["outcome"] == "rejected" and data["error"]["details"]["errors"][0]["rule"] == "idempotency", what
        said_as = {"message": "text", "to": "recipient", "from": "sender"}.get(what, what)  # the key in details, in words in the message
        assert data["error"]["details"]["differs"] == [what] and f"its {said_as} differs" in data["error"]["message"]
    human = run("send", *base[:13], "boss", "--anticipation", "action")
    assert human.returncode == 1 and "its anticipation, --label differ" in human.stderr, human.stderr
    human = run("inbox", "--as", "team:bob").stdout
    assert "sender:  reviewer of reports" in human and "thread:  job-7" in human
    bad = run("send", "team:bob", "x", "--message-id", "16e66e8a-not-a-uuid", "--from", "team:alice")
    assert bad.returncode == 2 and "--message-id" in bad.stderr


def test_show_any_message_you_sent_or_received_even_read_ones() -> None:
    mid = send_json("team:bob", "read me \x1b[1m", "--from", "team:alice", "--anticipation", "reply")["messageId"]
    assert run("inbox", "--as", "team:bob").returncode == 0  # read: it leaves the open inbox
    for who in ("team:alice", "team:bob"):
        shown = run("show", mid.lower(), "--from", who)
        assert shown.returncode == 0, shown.stderr
        assert f"message {mid}" in shown.stdout and "  read me \\u{001B}[1m" in shown.stdout and "\x1b" not in shown.stdout
    assert "<agent-link-message" in run("show", mid, "--from", "team:bob", "--envelope").stdout
    line = run("show", mid, "--from", "team:bob", "--ndjson")
    assert json.loads(line.stdout)["version"] == 1 and line.stdout.count("\n") == 1
    other = run("show", mid, "--from", "team:carol")
    assert other.returncode == 1 and "Traceback" not in other.stderr


@pytest.mark.installed_plugins("waits")
def test_from_on_commands_that_show_mail_says_the_rule_it_is_held_to() -> None:
    """`status ID --from ADDR` is refused outside ADDR's session: the help says so, not "act as"."""
    mid = send_json("team:bob", "status me", "--from", "team:alice")["messageId"]
    for command in ("status", "wait", "show"):  # search: its plugin's tests
        help_text = " ".join(run(command, "--help").stdout.split())
        assert "Read as this address: only inside that address's own session" in help_text, command
        assert "(unverified)" not in help_text, command
    assert "Act as this address (unverified)" in " ".join(run("send", "--help").stdout.split())
    bare = subprocess.run([AGENT_LINK, "status", mid, "--from", "team:alice"], capture_output=True, text=True, timeout=RUN_BOUND_S,
                          env={**os.environ, "AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS})
    assert bare.returncode == 1 and "Only team:alice may read its mail here" in bare.stderr
    assert "AGENT_LINK_INSPECT_ALL=1" in bare.stderr
    assert run("status", mid, "--from", "team:alice").returncode == 0  # inside team:alice's session


def test_interrupting_a_command_that_does_not_wait_is_one_line_and_exit_130(isolated_env: Path) -> None:
    """Ctrl-C of any other command (here a send reading its text from stdin) ends as the waits
    do: exit 130 and one line naming the command, never click's "Aborted!" with exit 1."""
    import time

    import psutil

    env = {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": BUT_WAITS, "AGENT_LINK_ADDRESS": "team:alice"}
    sender = subprocess.Popen([AGENT_LINK, "send", "team:bob", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, text=True, preexec_fn=ctrl_c_works)
    try:
        child = psutil.Process(sender.pid)
        deadline = time.monotonic() + RUN_BOUND_S  # a bound for a hung start, never a speed expectation
        # the command runs once it sleeps in a read of its stdin (fd 0): /proc/PID/syscall names the call and its fd
        read_nr = {"x86_64": "0", "aarch64": "63"}[os.uname().machine]
        while not (child.status() == psutil.STATUS_SLEEPING and Path(f"/proc/{sender.pid}/syscall").read_text().split()[:2] == [read_nr, "0x0"]):
            assert time.monotonic() < deadline and sender.poll() is None, "the send never started reading stdin"
            time.sleep(0.02)
        sender.send_signal(signal.SIGINT)
        out, err = sender.communicate(timeout=RUN_BOUND_S)
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait()
    assert sender.returncode == 130, err
    assert err.splitlines() == ["agent-link send: stopped by Ctrl-C (what it had finished stays done)."], err
    assert out == ""
    assert json.loads(run("inbox", "--as", "team:bob", "--all", "--json").stdout)["messages"] == []  # nothing was sent


@pytest.mark.installed_plugins("waits")
@pytest.mark.parametrize("command", [(), ("send",), ("inbox",), ("wait",)])
def test_dash_h_is_the_help(command: tuple[str, ...]) -> None:
    """``-h`` is ``--help`` at the root and for every command (the fast path included)."""
    short, long = core_process(*command, "-h"), core_process(*command, "--help")
    assert short.returncode == 0 and short.stdout == long.stdout and short.stdout.startswith("Usage: agent-link"), short.stderr


@pytest.mark.installed_plugins("waits")
@pytest.mark.parametrize("command", [(), ("send",), ("wait",), ("status",), ("inbox",)])
def test_a_help_creates_no_state(command: tuple[str, ...], tmp_path: Path) -> None:
    """A help has no side effects: no state dir, no database (a mistyped AGENT_LINK_STATE_DIR is not made real)."""
    state = tmp_path / "typo-dir"
    done = core_process(*command, "--help", env={"AGENT_LINK_STATE_DIR": str(state)})
    assert done.returncode == 0 and done.stdout.startswith("Usage: agent-link"), done.stderr
    assert not state.exists()


def test_inbox_all_says_when_its_listing_was_cut() -> None:
    """``--all`` lists the newest ``--limit`` messages; a full listing says how to see older ones."""
    for n in range(3):
        assert run("send", "team:bob", f"note {n}", "--from", f"team:sender{n}").returncode == 0
    cut = run("inbox", "--as", "team:bob", "--all", "--limit", "2").stdout
    assert "note 2" in cut and "note 0" not in cut
    page = json.loads(run("inbox", "--as", "team:bob", "--all", "--limit", "2", "--json").stdout)
    assert f"Older ones: agent-link inbox --as team:bob --all --limit 2 --before {page['nextBefore']}" in cut
    assert "Older ones" not in run("inbox", "--as", "team:bob", "--all", "--limit", "3").stdout
    # the next page starts right after the last one shown, and the last page says nothing more
    older = run("inbox", "--as", "team:bob", "--all", "--limit", "2", "--before", page["nextBefore"]).stdout
    assert "note 0" in older and "note 1" not in older and "note 2" not in older and "Older ones" not in older
    assert json.loads(run("inbox", "--as", "team:bob", "--all", "--json", "--before", page["nextBefore"]).stdout)["nextBefore"] is None
    # --before is a listing's cursor: only with --all, and only a message the reader can see
    assert run("inbox", "--as", "team:bob", "--before", page["nextBefore"]).returncode == 2
    unknown = run("inbox", "--as", "team:bob", "--all", "--before", "01HZY8D3J5Q7K9M2N4P6R8T0VW")
    assert unknown.returncode == 1 and "01HZY8D3J5Q7K9M2N4P6R8T0VW" in unknown.stderr
    assert said_text(run("inbox", "--as", "team:bob", "--all", "--before", "nonsense").stderr).startswith("agent-link inbox: --before: expected")
    theirs = json.loads(run("send", "team:carol", "not bob's", "--from", "team:dan", "--json").stdout)["messageId"]
    refused = run("inbox", "--as", "team:bob", "--all", "--before", theirs)
    assert refused.returncode == 1 and "not bob's" not in refused.stdout + refused.stderr
