# depthscale: `make demo` runs the main job, `make test` the test suite, each from nothing
# (Python 3.11 + pip). The venv pins torch==2.13.0 (constraints-ci.txt), the CPU wheel served here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint docs bench mutate clean report-shot

$(STAMP): pyproject.toml constraints-ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints-ci.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/depthscale reproduce --scale quick --out reproduce-out --workers 2

# two pytest workers (pytest-xdist) on the 2-core CI machine, one torch thread each
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/pytest -n 2

lint: $(STAMP)
	$(BIN)/ruff check src tests tools
	$(BIN)/mypy --strict src

# the documentation (docs/, mkdocs.yml; API reference from the docstrings) into site/; a
# warning (a broken link, a docstring it cannot read) fails the build
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# every claim at its smoke settings (about a minute) into a temp folder, then a headless-Chromium
# screenshot of its index.html at 1300x1600 (Debian: apt-get install chromium); prints both paths
report-shot: $(STAMP)
	$(BIN)/python tools/report_shot.py --smoke

bench: $(STAMP)
	$(BIN)/depthscale bench --json bench.json

# one-line mutations of the rules the claims test, each run against its tests (README)
mutate: $(STAMP)
	$(BIN)/python tools/mutate.py

clean:
	rm -rf $(VENV) reproduce-out runs bench.json site
