# orthobench developer targets. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# constraints.txt pins torch to the CPU build on the dev/CI machines (a loose `torch` would pull
# several GB of CUDA wheels); users with GPUs install the package with their own torch.
PIP_INSTALL := $(BIN)/pip install --disable-pip-version-check -q -c constraints.txt

.PHONY: install demo test test-slow test-cuda lint clean

$(BIN)/orthobench: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip
	$(PIP_INSTALL) -e '.[dev,dask]'
	@touch $@

install: $(BIN)/orthobench  ## create .venv and install orthobench with dev tools and dask

demo: install  ## run the embedded default job and write results/smoke/report.html
	$(BIN)/orthobench run suites/smoke.yaml

test: install  ## the default test run (CI): everything not marked slow
	$(BIN)/pytest -q

test-slow: install  ## only the slow tests
	$(BIN)/pytest -q -m slow

lint: install
	$(BIN)/ruff check orthobench tests
	$(BIN)/ruff format --check orthobench tests

clean:
	rm -rf $(VENV) results .pytest_cache .ruff_cache *.egg-info build dist
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
