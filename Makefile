# orthobench developer targets. CI (.ci/run): the variance gate, `make test-slow`, then `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# constraints.txt pins torch to the CPU build on the dev/CI machines (a loose `torch` would pull
# several GB of CUDA wheels); users with GPUs install the package with their own torch.
PIP_INSTALL := $(BIN)/pip install --disable-pip-version-check -q -c constraints.txt

.PHONY: install demo reproduce test test-slow test-cuda goldens lint docs clean

$(BIN)/orthobench: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip
	$(PIP_INSTALL) -e '.[dev,dask,vision]'
	@touch $@

install: $(BIN)/orthobench  ## create .venv and install orthobench with dev tools, dask and vision (transformers)

demo: install  ## suites/demo.yaml: OrthoBO vs mc-ei vs qLogEI vs Sobol, then a small probe; prints the report path
	$(BIN)/orthobench run suites/demo.yaml -o results/demo --workers 2 -q
	$(BIN)/orthobench probe suites/demo.yaml -o results/demo -q
	@echo "report: results/demo/report.html"

PAPER_RESULTS ?= results/paper
# The BO experiments of suites/paper/ (each also has a -full suite for a GPU machine or a cluster).
PAPER_RUNS := tpe weak-fit ensemble mc-budget cnn regret misspecified

reproduce: install  ## every reduced suite of suites/paper/ into results/paper/, one report, then the CSV tables of docs/reproduction/
	for s in $(PAPER_RUNS); do \
	  $(BIN)/orthobench run suites/paper/$$s-reduced.yaml -o $(PAPER_RESULTS)/paper-$$s-reduced --workers 2 -q || exit $$?; \
	done
	$(BIN)/orthobench probe suites/paper/probe-reduced.yaml -o $(PAPER_RESULTS)/paper-probe-reduced -q
	$(BIN)/orthobench report $(PAPER_RESULTS)/paper-*-reduced -o $(PAPER_RESULTS)/report.html \
	  --title "OrthoBO paper reproduction (reduced suites)"
	$(BIN)/python benchmarks/paper_tables.py $(PAPER_RESULTS) -o docs/reproduction
	@echo "report: $(PAPER_RESULTS)/report.html; tables: docs/reproduction/"

test: install  ## the default test run: everything not marked slow, docstring examples included
	$(BIN)/pytest -q -n auto --maxprocesses 4

test-slow: install  ## only the tests marked slow (statistical checks, end-to-end gate, executors, the report in a browser)
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
	  echo "chromium not installed: the browser test of the report will be skipped"
	$(BIN)/pytest -q -m slow -n auto --maxprocesses 4

test-cuda: install  ## only the CUDA cases of the device-parametrized tests (skipped without a GPU)
	$(BIN)/pytest -q -m cuda

goldens: install  ## recompute tests/golden_values.json, print old -> new; only for numerics or seeding changed on purpose
	$(BIN)/python -m tests.update_goldens --write

lint: install
	$(BIN)/ruff check orthobench tests
	$(BIN)/ruff format --check orthobench tests

docs: install  ## the documentation site (Sphinx: docs/*.md, the tutorials, the API reference) into docs/_build/html
	$(BIN)/sphinx-build -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

clean:
	rm -rf $(VENV) results .pytest_cache .ruff_cache *.egg-info build dist docs/_build
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
