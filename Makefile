# Two commands: `make demo` and `make test`. Both build what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# jsprof and its core dependencies, QuickJS built: all `make demo` needs. Its objects are
# kept in build/objcache (setup.py's JSPROF_BUILD_CACHE): the wheel tests/test_packaging.py
# builds from the sdist takes them instead of compiling QuickJS again (minutes at load 20).
CORE := $(VENV)/.jsprof-core
# ... and every extra and the test and docs tools (the dev extra): `make test` and the rest.
STAMP := $(VENV)/.jsprof-installed

.PHONY: demo field test test-load test-fast lint bench clean chromium nginx conformance fuzz dist docs docs-images

$(CORE): pyproject.toml $(wildcard setup.py) $(wildcard src/jsprof/engines/_quickjs/*) \
		src/jsprof/formats/_columns.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	JSPROF_BUILD_CACHE=$(CURDIR)/build/objcache $(PY) -m pip install --quiet -e .
	touch $(CORE)

# The dev extra's requirements beside the core (tools/extra_requirements.py expands its
# nested extras): `pip install -e '.[dev]'` would build QuickJS a second time.
$(STAMP): $(CORE) pyproject.toml tools/extra_requirements.py
	$(PY) tools/extra_requirements.py dev > $(VENV)/dev-requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/dev-requirements.txt
	touch $(STAMP)

# The field extra (jsprof serve, jsprof fleet) beside the core `make demo` installed: the
# README's tour runs a collector. Its requirements only, as for $(STAMP): `pip install -e
# '.[field]'` would build QuickJS again (4.5 min at load 11). A venv with jsprof in it is
# used as it is (make demo's, or the one `make test` runs in).
field:
	test -x $(VENV)/bin/jsprof || $(MAKE) $(CORE)
	$(PY) tools/extra_requirements.py field > $(VENV)/field-requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/field-requirements.txt

demo: $(CORE)
	mkdir -p demo-out
	$(VENV)/bin/jsprof record -o demo-out/app.jsprof.json examples/app.js
	$(VENV)/bin/jsprof report demo-out/app.jsprof.json --top 15 > demo-out/report.txt
	$(VENV)/bin/jsprof report demo-out/app.jsprof.json --tree --threshold 2 >> demo-out/report.txt
	$(VENV)/bin/jsprof report demo-out/app.jsprof.json --by line --top 8 >> demo-out/report.txt
	cat demo-out/report.txt
	$(VENV)/bin/jsprof flame demo-out/app.jsprof.json -o demo-out/flame.html
	@echo "open demo-out/flame.html in a browser for the flame graph"

# The flame graph tests render HTML in headless Chromium; install it once (CI runs as root).
chromium:
	@test -x /usr/bin/chromium || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

# The nginx snippet of docs/field.md runs in a real nginx (tests/test_field_nginx.py).
nginx:
	@test -x /usr/sbin/nginx || (apt-get update && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx)

# The format tests check our output with real JavaScript tools (speedscope's schema,
# pprof-format); install them from the lock file, again only when the lock file changes.
JS_STAMP := tests/js/node_modules/.jsprof-installed
$(JS_STAMP): tests/js/package-lock.json
	npm ci --prefix tests/js --no-audit --no-fund
	touch $(JS_STAMP)

# Everything, and a skipped test fails the run (JSPROF_NO_SKIP=1, tests/conftest.py); then
# the engines' sampling tests again on a loaded machine (test-load). The suite runs in
# TEST_WORKERS pytest-xdist workers, a test file to a worker (--dist loadfile: a module's
# browser, collector or Dask cluster is started once). One process: pytest ~20 min on a quiet
# machine, and the runs CI has passed. Two workers: 11.9 min at load 4 (5 failures), 61 min
# at load ~17 from other jobs (3 failures), 18 min at load 1-9 (5 failures: 3 Node
# recordings with 0-1 samples of a stretch Node hardly ran in, a QuickJS wall-clock share
# under SIGSTOPs, one real change of behaviour). Every failure was a test deciding on time
# a busy machine did not give the engine, none two workers sharing a port, file or cache;
# each one seen is fixed, but no full 2-worker run has passed yet, so one process stays the
# default until one does. TEST_WORKERS=2 runs two.
TEST_WORKERS ?= 0
# Each run's tmp_path in a dir of this checkout's own in /tmp (--basetemp: emptied when the
# run starts, never swept at its end). pytest's default numbered dirs in /tmp are swept at a
# session's end, all but the newest 3: test_conftest's inner pytests push the main run's dir
# out, so the under_load run's end deleted the whole suite's tmp (stop 48's CI: 41 tests
# passed in ~90 s, then that rmtree beside the busy loops ran into LOAD_LIMIT, exit 124).
# Not under the checkout: paths under the working directory print relative to it, and
# tests expect a script in tmp_path printed whole (test_diff's real-engine ones failed so).
TEST_TMP = $(or $(TMPDIR),/tmp)/jsprof-pytest-$(shell printf %s '$(CURDIR)' | cksum | cut -d' ' -f1)
test: $(STAMP) chromium nginx $(JS_STAMP)
	mkdir -p $(TEST_TMP)
	JSPROF_NO_SKIP=1 $(PY) -m pytest -q --durations=20 -n $(TEST_WORKERS) --dist loadfile \
		--basetemp=$(TEST_TMP)/all
	$(TEST_LOAD)

# The tests marked under_load (sample counts, shares, achieved intervals on QuickJS, Node and
# Chromium) run again beside busy loops, 3 per CPU at the default priority, as when CI shares
# its cores: a bound that holds only on a quiet machine fails here on every run, not on the
# day CI is loaded. Bounded: tools/under_load.py stops the loops and the tests when it ends,
# however it ends (Ctrl-C, a kill, a failure), and after LOAD_LIMIT seconds at most (exit
# 124). 45-95 s at load 21-34 on 2 cores (25 tests). A count test of an engine's samples
# belongs here: mark it @pytest.mark.under_load (its file is then found by the grep below).
LOAD_PER_CPU ?= 3
LOAD_LIMIT ?= 600
LOAD_FILES = $(shell grep -l '^@pytest.mark.under_load' tests/test_*.py)
TEST_LOAD = JSPROF_NO_SKIP=1 $(PY) tools/under_load.py --per-cpu $(LOAD_PER_CPU) \
	--limit $(LOAD_LIMIT) -- $(PY) -m pytest -q -p no:cacheprovider -m under_load --durations=5 \
	--basetemp=$(TEST_TMP)/load $(LOAD_FILES)
test-load: $(STAMP) chromium $(JS_STAMP)
	mkdir -p $(TEST_TMP)
	$(TEST_LOAD)

# For contributors: all but the tests that need headless Chromium, nginx or the npm test
# tools, and the wheel's build and install (pytest markers `chromium`, `nginx`, `npm`,
# `packaging`, registered in pyproject.toml).
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not chromium and not npm and not packaging and not nginx"

# The sdist and the wheel (carrying the built C extensions: installs with no compiler) in
# dist/. The wheel is built from the sdist, so a file the sdist lacks fails here. The pinned
# QuickJS sdist the venv's build fetched is reused, not downloaded again.
dist: $(STAMP)
	rm -rf dist
	JSPROF_QUICKJS_SDIST=$(abspath $(firstword $(wildcard build/sdist/quickjs_ng-*.tar.gz))) \
		$(PY) -m build --outdir dist .

# The spec's Profiler checks (tests/data/profiler/) run by `jsprof run` on each engine: a table.
conformance: $(STAMP) chromium
	$(PY) tests/conformance_table.py --engines chromium,quickjs,node

# Property-based fuzzing of every reader: 10,000 mutated real files per reader (long).
# `make test` runs the same properties on a short, fixed set of cases.
fuzz: $(STAMP) $(JS_STAMP)
	JSPROF_FUZZ=fuzz $(PY) -m pytest -q -p no:cacheprovider tests/test_fuzz.py

# The documentation site (docs/, mkdocs.yml) into site/; strict: a broken link fails.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# The pictures in docs/images/, made again from real recordings (headless Chromium).
docs-images: $(STAMP) chromium
	$(PY) tools/docs_images.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks tools

bench: $(STAMP)
	$(PY) benchmarks/bench_trace.py
	$(PY) benchmarks/bench_quickjs.py

clean:
	rm -rf $(VENV) build dist demo-out site src/*.egg-info
