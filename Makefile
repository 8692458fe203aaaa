# `make install` sets up everything on a fresh machine; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PLUGINS := codex claude roles receipts projects approvals web forks
# example plugins (docs/plugins.md): installed and tested like the others
EXAMPLES := filehost

.PHONY: install test lint bench hosts browser clean

install:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# compat: plain path entries; setuptools' default editable finder costs ~30 ms at every
	# interpreter start, and hosts start `agent-link hook` on every prompt.
	$(PY) -m pip install --quiet --config-settings editable_mode=compat \
		-e '.[test]' -e ./testing $(foreach p,$(PLUGINS),-e './plugins/$(p)[test]') \
		$(foreach p,$(EXAMPLES),-e './examples/$(p)[test]')
	$(MAKE) hosts
	$(MAKE) browser

# The pinned real host CLIs (Codex, Claude Code) for the real-host tests, from hosts/package-lock.json.
hosts:
	cd hosts && npm ci --no-audit --no-fund --loglevel=error

# The system Chromium that the web page's browser tests drive (Debian package chromium);
# installed when make runs as root (as CI does), else the command is printed.
browser:
	@if test -x /usr/bin/chromium || command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "The web page's browser tests need Chromium. Install it with: sudo apt-get update && sudo apt-get install -y chromium"; fi

test: lint
	$(PY) -m pytest -q

# Static checks (config in pyproject.toml) on the core, every plugin, testing/ and examples/.
lint:
	$(VENV)/bin/ruff check agent_link_core plugins testing examples tests
	$(VENV)/bin/mypy agent_link_core testing/agent_link_testing \
		$(foreach p,$(PLUGINS),plugins/$(p)/agent_link_$(p)) $(foreach p,$(EXAMPLES),examples/$(p)/agent_link_$(p))

bench:
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) hosts/node_modules
