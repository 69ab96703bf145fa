# Set-up and everyday commands: `make test`, `make book`, `make lab` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The book and the tests always run in the quick profile: CPU, offline, shipped or generated data.
# BOOK_ENV is the environment of every notebook kernel (`make book`, `make test-notebooks`): it
# removes MPLBACKEND so the kernels use IPython's inline backend and figures become cell outputs
# (tests/test_book_figures.py executes a fixture notebook in exactly this environment).
BOOK_ENV := env -u MPLBACKEND NORMLAB_PROFILE=quick PYDEVD_DISABLE_FILE_VALIDATION=1 OMP_NUM_THREADS=1
# Unit tests draw nothing to a screen: they keep the non-interactive Agg backend.
UNIT_ENV := NORMLAB_PROFILE=quick MPLBACKEND=Agg PYDEVD_DISABLE_FILE_VALIDATION=1 OMP_NUM_THREADS=1
NB_WORKERS ?= 2
# `make lab PROFILE=standard`: the profile the notebooks run in (empty: quick, with or without
# a GPU; the chapters print what the larger profiles cost and the command that runs them).
PROFILE ?=
LAB_ARGS ?=

.PHONY: book check-figures lint test test-unit verify test-notebooks test-structure test-browser lab book-env clean publish

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

$(VENV)/.book-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e ".[book]"
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e ".[test]"
	touch $@ $(VENV)/.book-installed

$(VENV)/.lab-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e ".[lab]"
	touch $@

# After the HTML, the reader notebooks (book/_ext/normlab_book/reader.py, the book's own
# tooling, not in the wheel): every chapter in plain Markdown with its glued numbers filled
# in from the executed notebooks, into _build/notebooks/ (what `make lab` opens) and
# _build/html/notebooks/ (published with the HTML; the Colab buttons).
book: $(VENV)/.book-installed
	$(BOOK_ENV) $(BIN)/jupyter-book build . -W -n --keep-going
	$(MAKE) check-figures
	PYTHONPATH=book/_ext $(BIN)/python -m normlab_book.reader _build

# By hand, what .github/workflows/publish.yml does on every push to main: `make book`, then
# _build/html (reader notebooks included) committed as the whole content of the pages branch
# (_config.yml's launch_buttons.pages_branch, which the Colab buttons open) and pushed to
# PAGES_REMOTE, from a temporary git worktree (the checkout is left as it is). The tests
# lint this target (tests/test_publish.py) and never run it.
PAGES_BRANCH := $(shell sed -n 's/^ *pages_branch: *//p' _config.yml)
PAGES_REMOTE ?= origin
publish: book
	@test -n "$(PAGES_BRANCH)" || { echo "error: _config.yml names no launch_buttons.pages_branch" >&2; exit 2; }
	@test -f _build/html/index.html || { echo "error: no _build/html/index.html to publish" >&2; exit 2; }
	set -e; made=$$(git rev-parse --short HEAD); tmp=$$(mktemp -d); \
	trap 'git -C "$(CURDIR)" worktree remove --force "$$tmp" 2>/dev/null; rm -rf "$$tmp"; git -C "$(CURDIR)" branch -q -D normlab-publish-$$$$ 2>/dev/null || true' EXIT; \
	git worktree add --quiet --detach "$$tmp"; \
	cd "$$tmp"; git checkout --quiet --orphan normlab-publish-$$$$; git rm -r -q -f --ignore-unmatch .; \
	cp -R "$(CURDIR)/_build/html/." .; touch .nojekyll; git add -A; \
	git commit --quiet -m "Publish the book built from $$made"; \
	git push --force $(PAGES_REMOTE) HEAD:refs/heads/$(PAGES_BRANCH)

# Every chapter whose notebook draws a figure shows at least one image, and each is a valid PNG.
check-figures:
	$(BIN)/python tests/book_figures.py _build/html

# Each part in turn, its wall time printed as it ends and all of them at the end (issue 53's
# goal: at most 15 minutes after the install, on 2 cores).
TEST_PARTS := lint test-unit verify test-notebooks test-structure test-browser
test: $(VENV)/.test-installed
	@times=; for part in $(TEST_PARTS); do \
		start=$$(date +%s); $(MAKE) --no-print-directory $$part || exit $$?; \
		took=$$(( $$(date +%s) - start )); echo "make test: $$part took $$took s"; \
		times="$$times $$part=$${took}s"; \
	done; echo "make test: every part passed;$$times"

# Ruff's lint rules and its formatter (pyproject.toml's [tool.ruff]) over the package, tests,
# benchmarks and the book's tooling (book/_ext); `ruff check --fix` and `ruff format` repair
# what they find.
lint:
	$(BIN)/ruff check companion tests benchmarks book/_ext
	$(BIN)/ruff format --check companion tests benchmarks book/_ext

test-unit:
	$(UNIT_ENV) $(BIN)/python -m pytest tests -n $(NB_WORKERS)

# Every shipped saved set: digests, schema, grid and table, then re-runs of a sample of its
# records within VERIFY_BUDGET seconds a set (exactly where this machine's numerics made a
# record, else within its configuration's band). The sets are split over NB_WORKERS
# processes; the unit tests check both comparison modes on sets they make themselves.
VERIFY_BUDGET ?= 60
VERIFY_SAMPLE ?= 2
SAVED_SETS = $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard companion/normlab/saved/*/)))))
verify: $(VENV)/.test-installed
	@pids=; for k in $$(seq 0 $$(($(NB_WORKERS) - 1))); do \
		sets=$$(echo $(SAVED_SETS) | tr ' ' '\n' | awk -v k=$$k -v n=$(NB_WORKERS) '(NR-1) % n == k'); \
		[ -n "$$sets" ] || continue; \
		$(UNIT_ENV) $(BIN)/python -m normlab verify $$sets --sample $(VERIFY_SAMPLE) \
			--budget $(VERIFY_BUDGET) & pids="$$pids $$!"; \
	done; status=0; for p in $$pids; do wait $$p || status=1; done; exit $$status

# Each notebook runs once, in a fresh kernel, with its asserts as the claims it checks: here,
# or in test-structure for STRUCTURE_EXECUTES (whose build fails on a cell's error).
test-notebooks:
	$(BOOK_ENV) $(BIN)/python -m pytest --nbval-lax --nbval-current-env \
		-n $(NB_WORKERS) --dist loadscope $(filter-out $(STRUCTURE_EXECUTES),$(wildcard book/*.ipynb))

# Warnings-as-errors Sphinx build of the book's structure. It executes the notebooks with
# interactive figures, STRUCTURE_EXECUTES (chapters 10 and 11, in the kernels' BOOK_ENV), so
# that the browser test can drive them; every other notebook renders without outputs, and so
# without the numbers its prose glues (`make book` fails on a missing one). The generated
# conf.py names _config.yml's local_extensions but, unlike `jupyter-book build`, does not put
# their folder (book/_ext, the book's tooling) on sys.path: PYTHONPATH does.
STRUCTURE_EXECUTES := book/10_gate.ipynb book/11_bottleneck.ipynb
NOT_EXECUTED := $(foreach nb,$(filter-out $(STRUCTURE_EXECUTES),$(wildcard book/*.ipynb)),'$(nb)',)
test-structure:
	$(BIN)/jupyter-book config sphinx . > /dev/null
	echo "nb_execution_excludepatterns = [$(NOT_EXECUTED)]" >> conf.py
	echo "suppress_warnings += ['mystnb.glue']  # glued numbers of notebooks not executed here" >> conf.py
	$(BOOK_ENV) PYTHONPATH=book/_ext $(BIN)/python -m sphinx -W -n --keep-going -q -b html \
		-D nb_execution_mode=force -c . . _build/structure
	rm -f conf.py

# JupyterLab, with the widget extension, on the reader notebooks that `make book` writes
# (_build/notebooks/: glued numbers filled in, exercises and solutions in plain Markdown), or,
# before any `make book`, on the chapters' MyST sources in book/, where Jupyter shows the roles
# and directives as raw text. E.g. `make lab PROFILE=standard`.
# As root (containers, Colab-like machines) JupyterLab refuses to start without --allow-root.
LAB_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)
LAB_DIR := $(if $(wildcard _build/notebooks/*.ipynb),_build/notebooks,book)
LAB_NOTE := make lab: no reader notebooks in _build/notebooks/ yet, so JupyterLab opens the \
	MyST sources in book/ (glued numbers and exercises show as raw text); 'make book' writes them.
lab: $(VENV)/.lab-installed
	$(if $(PROFILE),NORMLAB_PROFILE=$(PROFILE) $(BIN)/python -c "import normlab; normlab.profile()")
	$(if $(filter book,$(LAB_DIR)),@echo "$(LAB_NOTE)")
	cd $(LAB_DIR) && env -u MPLBACKEND $(if $(PROFILE),NORMLAB_PROFILE=$(PROFILE)) \
		$(abspath $(BIN))/jupyter-lab $(LAB_ROOT) $(LAB_ARGS)

# The notebook kernels' environment, for tests/test_book_figures.py.
book-env:
	@echo '$(BOOK_ENV)'

# Headless Chromium (Debian's `chromium`, the one system package) opens every page of the
# structure build: local requests, links, images, typeset maths, Colab links, and moves every
# control of the interactive figures (chapters 10 and 11); screenshots go to _build/screenshots/. Without Chromium it says loudly that it skipped (CI never skips).
test-browser:
	PYTHONPATH=book/_ext $(BIN)/python tests/browser_check.py _build/structure

clean:
	rm -rf _build conf.py
