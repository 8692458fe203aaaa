"""``python faulty_page.py <agent-link arguments>``: the ``agent-link`` command with one more
plugin, ``faultypanel``, whose panel ``faulty`` does what ``WEB_FAULT`` says (``hang``: its
render sleeps an hour). The web plugin's tests run the real page server with it in a
subprocess (signals need a process of their own), and ``health`` in another, as a person
would; nothing is installed."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import pytest

from agent_link_core import hookimpl

#: the stderr line of a render that begins its hang (test_web_panel_faults.py waits for it)
HANGING = "faultypanel: the render hangs now"


class FaultyPanelPlugin:
    @hookimpl
    def agent_link_register_panels(self, register: Any) -> None:
        from agent_link_web.panels import Panel, PanelView

        def render(app: Any) -> PanelView:
            if os.environ.get("WEB_FAULT") == "hang":
                print(HANGING, file=sys.stderr, flush=True)  # a test waits for it
                time.sleep(3600)
            return PanelView(["a"], [["fine"]])

        register(Panel("faulty", "Faulty", render))


if __name__ == "__main__":
    from agent_link_testing.cli_plugins import add_cli_plugins

    add_cli_plugins(pytest.MonkeyPatch(), ("faultypanel", FaultyPanelPlugin()))
    from agent_link_core.cli import main

    sys.argv = ["agent-link", *sys.argv[1:]]
    main()
