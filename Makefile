# `make install` sets up everything on a fresh machine; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PLUGINS := presence waits budgets hostkit legacy search listings loops profiles conversations codex claude roles receipts projects approvals web forks leases opencode settings machines
# example plugins (docs/plugins.md): installed and tested like the others
EXAMPLES := filehost

.PHONY: install bytecode test test-unit test-realhost test-previous test-latest lint bench hosts browser clean

# One line per step; pip's own output (build back-end warnings included) goes to
# $(VENV)/install.log, and its last lines are shown when a step fails.
INSTALL_LOG := $(VENV)/install.log
install:
	@echo "install: virtualenv $(VENV)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "install: pip"
	@$(PY) -m pip install --quiet --upgrade pip > $(INSTALL_LOG) 2>&1 || { tail -n 40 $(INSTALL_LOG); exit 1; }
	@echo "install: agent-link, the test kit and the plugins $(PLUGINS) (editable; log: $(INSTALL_LOG))"
	@# compat: plain path entries; setuptools' default editable finder costs ~30 ms at every
	@# interpreter start, and hosts start `agent-link hook` on every prompt.
	@$(PY) -m pip install --quiet --config-settings editable_mode=compat \
		-e '.[test]' -e ./testing $(foreach p,$(PLUGINS),-e './plugins/$(p)[test]') \
		$(foreach p,$(EXAMPLES),-e './examples/$(p)[test]') >> $(INSTALL_LOG) 2>&1 \
		|| { tail -n 40 $(INSTALL_LOG); exit 1; }
	@$(MAKE) --no-print-directory bytecode
	@$(MAKE) --no-print-directory hosts
	@$(MAKE) --no-print-directory browser

# The editable sources byte-compiled once (pip compiles only what it copies into site-packages):
# where PYTHONDONTWRITEBYTECODE is set, as in many shells and containers, nothing else caches
# them and every `agent-link` call compiled its ~100 modules again (an inbox read took 9x a bare
# interpreter start instead of 4x). Run it again after editing with that variable set.
bytecode:
	@echo "install: bytecode of the core, the test kit and the plugins"
	@$(PY) -m compileall -q -j 0 agent_link_core testing/agent_link_testing \
		$(foreach p,$(PLUGINS),plugins/$(p)/agent_link_$(p)) $(foreach p,$(EXAMPLES),examples/$(p)/agent_link_$(p))

# The real host CLIs for the real-host tests, each folder from its package-lock.json: Node >= 22
# from the npm registry (hosts/node), the current pins (hosts/), the previous pins (hosts/previous).
hosts:
	@hosts/install.sh

# The system Chromium that the web page's browser tests drive (Debian package chromium);
# installed when make runs as root (as CI does), else the command is printed. apt's output
# goes to $(BROWSER_LOG); its last lines are shown when the step fails.
CHROMIUM ?= chromium
BROWSER_LOG = $(VENV)/browser.log
browser:
	@if command -v $(CHROMIUM) >/dev/null 2>&1 || test -x /usr/bin/$(CHROMIUM); then :; \
	elif [ "$$(id -u)" = 0 ]; then echo "install: chromium for the web page's browser tests (apt-get; log: $(BROWSER_LOG))"; \
		mkdir -p $(VENV); \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(CHROMIUM); } > $(BROWSER_LOG) 2>&1 \
		|| { tail -n 40 $(BROWSER_LOG); exit 1; }; \
	else echo "The web page's browser tests need Chromium. Install it with: sudo apt-get update && sudo apt-get install -y chromium"; fi

# `make test`: lint; the unit tests in parallel workers; the tests that start real programs (the
# pinned host CLIs against stub models, a NATS server) on the current pins; then the real-host
# tests again on the previous pins. See README "Tests" for what each step runs and how long.
# Workers: xdist's `-n auto` is one per core; WORKERS=N sets every step's, WORKERS=1 runs serially.
# The unit tests mostly wait (hook budgets and timeouts run out, subprocesses start): with one
# worker per core they used 4 CPU-minutes in 3.5 min of wall time on 2 idle cores, with two per
# core the same CPU in 2.4 min, so test-unit runs two per core.
WORKERS ?= auto
UNIT_WORKERS := $(if $(filter command line environment,$(origin WORKERS)),$(WORKERS),$(shell echo $$(( $$(getconf _NPROCESSORS_ONLN) * 2 ))))
# pytest caches each test module's rewritten asserts next to it (__pycache__); an inherited
# PYTHONDONTWRITEBYTECODE would have every worker and every `agent-link` process a test starts
# compile everything again.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q --dist worksteal
UNIT := not realhost and not machines and not nested_suites and not packaging
test: lint
	$(MAKE) --no-print-directory test-unit
	$(MAKE) --no-print-directory test-realhost
	$(MAKE) --no-print-directory test-previous

# Everything that starts no real host and no NATS server.
test-unit:
	$(PYTEST) -n $(UNIT_WORKERS) -m "$(UNIT)"

# The real-host tests (each starts its hosts in its own temporary HOME, stub models on ports
# the system picks), the machines plugin's NATS tests and the nested runs of suites with a
# plugin uninstalled (agent_link_testing.plugin_suites), on the current pins.
test-realhost:
	$(PYTEST) -n $(WORKERS) -m "realhost or machines or nested_suites or packaging"

# The real-host tests against the previous pins (hosts/previous).
test-previous:
	AGENT_LINK_HOSTS_DIR=hosts/previous $(PYTEST) -n $(WORKERS) -m realhost

# The real-host tests against the newest host releases the npm registry serves today (scratch folder).
test-latest:
	hosts/latest.sh

# Static checks (config in pyproject.toml) on the core, every plugin, testing/ and examples/;
# then the code's shape against the design's targets and the allowance scripts/shape_allowance.json.
lint:
	$(VENV)/bin/ruff check agent_link_core plugins testing examples tests bench scripts
	$(VENV)/bin/mypy agent_link_core testing/agent_link_testing bench/run.py scripts/check_shape.py \
		$(foreach p,$(PLUGINS),plugins/$(p)/agent_link_$(p)) $(foreach p,$(EXAMPLES),examples/$(p)/agent_link_$(p))
	$(PY) scripts/check_shape.py

# every section; `make bench SECTIONS="reads hook"` runs only those (names: bench/run.py SECTIONS)
bench:
	$(PY) bench/run.py $(SECTIONS)

clean:
	rm -rf $(VENV) hosts/node_modules hosts/previous/node_modules hosts/node/node_modules
