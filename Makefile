# Two commands: `make demo` and `make test`. Both build what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.jsprof-installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml $(wildcard setup.py) $(wildcard src/jsprof/engines/_quickjs/*)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p demo-out
	$(VENV)/bin/jsprof report tests/data/chromium/trace-basic.json --top 15

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

bench: $(STAMP)
	$(PY) benchmarks/bench_trace.py

clean:
	rm -rf $(VENV) build demo-out src/*.egg-info
