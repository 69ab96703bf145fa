# Two set-up commands: `make book` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The book and the tests always run in the quick profile: CPU, offline, shipped or generated data.
RUN := NORMLAB_PROFILE=quick MPLBACKEND=Agg PYDEVD_DISABLE_FILE_VALIDATION=1 OMP_NUM_THREADS=1
NB_WORKERS ?= 2

.PHONY: book test test-unit test-notebooks test-structure clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

$(VENV)/.book-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e ".[book]"
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e ".[test]"
	touch $@ $(VENV)/.book-installed

book: $(VENV)/.book-installed
	$(RUN) $(BIN)/jupyter-book build . -W -n --keep-going

test: $(VENV)/.test-installed
	$(MAKE) test-unit test-notebooks test-structure

test-unit:
	$(RUN) $(BIN)/python -m pytest tests -n $(NB_WORKERS)

# Each notebook runs once, in a fresh kernel, with its asserts as the claims it checks.
test-notebooks:
	$(RUN) $(BIN)/python -m pytest --nbval-lax --nbval-current-env \
		-n $(NB_WORKERS) --dist loadscope book

# Warnings-as-errors Sphinx build of the book's structure, without executing notebooks again.
test-structure:
	$(BIN)/jupyter-book config sphinx . > /dev/null
	$(RUN) $(BIN)/python -m sphinx -W -n --keep-going -q -b html \
		-D nb_execution_mode=off -c . . _build/structure
	rm -f conf.py

clean:
	rm -rf _build conf.py
