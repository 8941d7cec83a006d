# sandloom — the two commands: `make run` and `make test`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
MESON      ?= meson
PYTEST     ?= /usr/bin/python3 -m pytest

.PHONY: all build run test deps unit integration asan fuzz docs clean

all: build

deps:
	@scripts/deps

$(BUILD)/build.ninja:
	@$(MESON) setup $(BUILD) --buildtype=debugoptimized >/dev/null

build: $(BUILD)/build.ninja
	@ninja -C $(BUILD) >/dev/null || ninja -C $(BUILD)

# Installs what is missing, builds, and starts the daemon in the foreground on the
# embedded SQLite default; prints the URL and the token.
run:
	@scripts/deps --run-only
	@$(MAKE) --no-print-directory build
	@exec scripts/run

# Installs what is missing, builds, and runs every suite: C unit tests, the integration
# tests against the real daemon, the same under ASan+UBSan, and a short fuzz run.
test:
	@scripts/deps
	@scripts/test

unit: build
	@meson test -C $(BUILD) --print-errorlogs

integration: build
	@SANDLOOM_BINARY=$(CURDIR)/$(BUILD)/sandloom $(PYTEST) -q tests/integration

docs: build
	@$(BUILD)/sandloom config-doc > docs/CONFIGURATION.md

# Installs what is missing (gnuplot-nox too), builds, and runs the standard benchmark set against a
# fresh local daemon: bench/results/<date>-<host>.json, .md and a latency plot (docs/BENCHMARKS.md).
.PHONY: bench
bench:
	@scripts/deps --bench
	@$(MAKE) --no-print-directory build
	@SANDLOOM_BINARY=$(CURDIR)/$(BUILD)/sandloom scripts/bench

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
