# `make install` sets up everything on a fresh machine; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PLUGINS := codex claude roles receipts projects approvals
# example plugins (docs/plugins.md): installed and tested like the others
EXAMPLES := filehost

.PHONY: install test lint bench hosts clean

install:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# compat: plain path entries; setuptools' default editable finder costs ~30 ms at every
	# interpreter start, and hosts start `agent-link hook` on every prompt.
	$(PY) -m pip install --quiet --config-settings editable_mode=compat \
		-e '.[test]' -e ./testing $(foreach p,$(PLUGINS),-e './plugins/$(p)[test]') \
		$(foreach p,$(EXAMPLES),-e './examples/$(p)[test]')
	$(MAKE) hosts

# The pinned real host CLIs (Codex, Claude Code) for the real-host tests, from hosts/package-lock.json.
hosts:
	cd hosts && npm ci --no-audit --no-fund --loglevel=error

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
