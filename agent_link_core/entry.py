"""The ``agent-link`` console script.

``agent-link hook ...`` is dispatched before anything heavy is imported: hosts run it on
every prompt, so it must not pay for click, pluggy, mcp or pydantic.
"""

import sys


def main() -> None:
    """Run ``agent-link``; exits with the command's status."""
    argv = sys.argv[1:]
    if argv[:1] == ["hook"]:
        from agent_link_core.hook import main as hook_main

        sys.exit(hook_main(argv[1:]))
    from agent_link_core.cli import main as cli_main

    cli_main()
