"""``agent-link machines permissions NAME``: the NATS permissions of one machine's user, as
the server's config takes them (the engine enforcing them: test_machines_permissions.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_machines.permissions import machine_permissions

AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_LINK_LOAD_PLUGINS": "presence waits machines"}
    return subprocess.run([AGENT_LINK, "machines", "permissions", *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_permissions_name_only_the_machines_own_mail_consumer_and_entry(isolated_env: Path) -> None:
    perms = machine_permissions("alpha")
    publish = perms["publish"]["allow"]
    assert "agent_link.mail.*.alpha" in publish and perms["subscribe"]["allow"] == ["_INBOX.>"]
    assert [s for s in publish if s.startswith("agent_link.mail.")] == ["agent_link.mail.*.alpha"]  # mail only as itself
    consumers = [s for s in publish if ".CONSUMER." in s and "AGENT_LINK_MAIL" in s]
    # its mail consumer, the one draining the subject of earlier versions (agent_link.mail.alpha),
    # and the mail consumer of a machine upgraded from one
    assert consumers and all(any(f"{c}_alpha" in s for c in ("machine", "oldmail", "mail")) for s in consumers)
    assert [s for s in consumers if "CONSUMER.CREATE" in s] == [
        "$JS.API.CONSUMER.CREATE.AGENT_LINK_MAIL.machine_alpha.agent_link.mail.alpha.*",
        "$JS.API.CONSUMER.CREATE.AGENT_LINK_MAIL.oldmail_alpha.agent_link.mail.alpha",
        "$JS.API.CONSUMER.CREATE.AGENT_LINK_MAIL.mail_alpha.agent_link.mail.alpha.*"]
    assert [s for s in publish if s.startswith("$KV.")] == ["$KV.agent_link_machines.dir.alpha", "$KV.agent_link_machines.claim.alpha"]
    assert not any("MSG.GET.AGENT_LINK_MAIL" in s or "DIRECT.GET.AGENT_LINK_MAIL" in s for s in publish)

    done = run("alpha")
    assert done.returncode == 0 and json.loads(done.stdout) == perms, done.stderr


def test_a_bad_machine_name_is_one_line(isolated_env: Path) -> None:
    with pytest.raises(ValueError):
        machine_permissions("al pha")
    done = run("al.pha")
    assert done.returncode == 2 and done.stdout == ""  # bad usage, as a bad argument is everywhere else
    assert done.stderr.startswith("agent-link machines: 'al.pha' is not a machine name") and done.stderr.count("\n") == 1, done.stderr
