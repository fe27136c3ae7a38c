# Reproducibility artifact for "Rethinking the Security of DP-SGD" (Wang et al. 2026).
#
#   make all      execute every notebook (MODE auto: full on a CUDA GPU, else quick), build the book
#   make test     pytest: tests/ plus every notebook run once more with nbval (smoke parameters, read from the test book's results),
#                 and the book built in smoke mode (build/testbook) checked in headless Chromium
#   make test-loaded  make test with the CPUs kept busy (LOAD_PROCS=2 busy loops; LOAD_CORES=1: pinned to one core)
#   make figures  execute notebooks/*.py into book/notebooks/*.ipynb (writes results/, figures/)
#   make book     figures + jupyter-book build (warnings are errors)
#   make grade    grade every claim of the paper from results/ (results/grade.json, book/grade.md)
#   make appendix artifact appendix: claims, experiments, commands, measured time and disk
#                 (book/appendix.md and results/artifact_appendix.md)
#   make appendix-snapshot  ARTIFACT-APPENDIX.md at the root: the PETS-form appendix of the last run (committed)
#   make dist     what a Zenodo upload takes (after make all): source archive of the commit, built book,
#                 ARTIFACT-APPENDIX.md, .zenodo.json, SHA256SUMS, in dist/
#   make bench    run bench/bench_*.py in turn
#   make sync     pair notebooks/*.py <-> notebooks/*.ipynb (jupytext --sync)
#   make lint     actionlint + zizmor (.github/workflows), hadolint (Dockerfile), cffconvert
#                 --validate (CITATION.cff), from build/lint-venv/; make test runs it first
#   make device-check  every CUDA code path of full mode on a slice of each notebook, CUDA vs CPU,
#                 costs and the extrapolated full-mode time per notebook (results/device_check.json;
#                 at most 8 min on one GPU; CI: make device-check DEVICE=cpu MODE=smoke)
#   make clean    remove generated outputs (build/ results/ figures/ book/_build book/notebooks)
#   make distclean  clean + remove .venv
#
# Variables: MODE=smoke|quick|full (default: auto), DEVICE=cpu|cuda (default: auto; cuda only
#            where torch sees a GPU), SEED=0 (an integer 0 <= SEED < 2^63),
#            PYTEST_ARGS= (extra pytest options for make test, e.g. --durations=30),
#            WORKERS=<cores> (Dask workers for real implementation steps; 1: in process),
#            DASK_SCHEDULER= (tcp://host:8786: an existing Dask cluster runs those steps),
#            PYTHON=python3 (interpreter used to create .venv).
# With no virtualenv/conda env active, everything runs in ./.venv, created from
# requirements-lock.txt on first use. With one active, its python is used.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
MAKEFLAGS += --no-builtin-rules

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
PYTHON ?= python3
SEED ?= 0
# When this make started (epoch seconds): `make all` records its own wall time from it.
START_TS := $(shell date +%s)

# ---------------------------------------------------------------- environment
ifeq ($(strip $(VIRTUAL_ENV)$(CONDA_PREFIX)),)
  ENV_KIND := venv
  PY := $(ROOT)/.venv/bin/python
  ENV_TARGET := .venv/.installed
else
  ENV_KIND := active
  ifneq ($(strip $(VIRTUAL_ENV)),)
    PY := $(VIRTUAL_ENV)/bin/python
  else
    PY := $(CONDA_PREFIX)/bin/python
  endif
  ENV_TARGET := env-check
endif
BIN := $(dir $(PY))
JUPYTEXT := $(PY) -m jupytext
PAPERMILL := $(PY) -m papermill
JB := $(BIN)jupyter-book

# Kernel for papermill: a kernelspec that runs exactly $(PY), in a repo-local Jupyter
# path that takes precedence over any user-level "paperlib"/"python3" kernel.
KERNEL_NAME := paperlib
JUPYTER_DIR := $(ROOT)/build/jupyter
KERNEL_SPEC := $(JUPYTER_DIR)/kernels/$(KERNEL_NAME)/kernel.json
JUPYTER_ENV := JUPYTER_PATH=$(JUPYTER_DIR) JUPYTER_PLATFORM_DIRS=1 PYDEVD_DISABLE_FILE_VALIDATION=1

# ---------------------------------------------------------------- MODE / DEVICE
# Evaluated lazily (inside recipes, after the environment exists), at most once.
ALLOWED_MODES := smoke quick full
CUDA_AVAILABLE = $(eval CUDA_AVAILABLE := $(shell $(PY) -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo error))$(CUDA_AVAILABLE)

MODE ?=
ifeq ($(strip $(MODE)),)
  MODE_SRC := auto
  override MODE = $(eval override MODE := $(if $(filter 1,$(CUDA_AVAILABLE)),full,quick))$(MODE)
else
  MODE_SRC := given
  ifneq ($(words $(MODE)),1)
    $(error MODE='$(MODE)' is not allowed: use MODE=smoke, MODE=quick or MODE=full)
  endif
  ifeq ($(filter $(MODE),$(ALLOWED_MODES)),)
    $(error MODE='$(MODE)' is not allowed: use MODE=smoke, MODE=quick or MODE=full)
  endif
endif

DEVICE ?=
ifeq ($(strip $(DEVICE)),)
  override DEVICE = $(eval override DEVICE := $(if $(and $(filter full,$(MODE)),$(filter 1,$(CUDA_AVAILABLE))),cuda,cpu))$(DEVICE)
else
  ifneq ($(words $(DEVICE)),1)
    $(error DEVICE='$(DEVICE)' is not allowed: use DEVICE=cpu or DEVICE=cuda)
  endif
  ifeq ($(filter $(DEVICE),cpu cuda),)
    $(error DEVICE='$(DEVICE)' is not allowed: use DEVICE=cpu or DEVICE=cuda)
  endif
  # cuda only where torch sees a GPU (checked again in $(PARAMS_STAMP) when no environment exists yet)
  ifeq ($(DEVICE),cuda)
    ifeq ($(CUDA_AVAILABLE),0)
      $(error DEVICE=cuda is not available: torch.cuda.is_available() is False with $(PY); use DEVICE=cpu)
    endif
    # no environment yet (torch cannot be asked): refuse before creating anything when no NVIDIA GPU is present
    ifeq ($(CUDA_AVAILABLE),error)
      ifeq ($(wildcard /dev/nvidia0)$(shell command -v nvidia-smi 2>/dev/null),)
        $(error DEVICE=cuda is not available: this machine has no NVIDIA GPU (no /dev/nvidia0, no nvidia-smi); use DEVICE=cpu)
      endif
    endif
  endif
endif

# SEED: an integer 0 <= SEED < 2^63 in plain decimal (numpy's and torch's seeds), checked like MODE.
SEED_ERROR = $(error SEED='$(SEED)' is not allowed: use an integer 0 <= SEED < 2^63 without leading zeros, e.g. SEED=0)
SEED_NONDIGITS := $(subst 0,,$(subst 1,,$(subst 2,,$(subst 3,,$(subst 4,,$(subst 5,,$(subst 6,,$(subst 7,,$(subst 8,,$(subst 9,,$(SEED)))))))))))
SEED_LENGTH := $(words $(subst 0,0 ,$(subst 1,1 ,$(subst 2,2 ,$(subst 3,3 ,$(subst 4,4 ,$(subst 5,5 ,$(subst 6,6 ,$(subst 7,7 ,$(subst 8,8 ,$(subst 9,9 ,$(SEED))))))))))))
ifneq ($(words $(SEED)),1)
  $(SEED_ERROR)
else ifneq ($(SEED_NONDIGITS),)
  $(SEED_ERROR)
else ifneq ($(and $(filter 0%,$(SEED)),$(filter-out 0,$(SEED))),)
  $(SEED_ERROR)
else ifneq ($(filter-out 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19,$(SEED_LENGTH)),)
  $(SEED_ERROR)
else ifeq ($(SEED_LENGTH),19)
  # same length: string order is numeric order (2^63 = 9223372036854775808)
  ifneq ($(shell [[ "$(SEED)" < 9223372036854775808 ]] && echo ok),ok)
    $(SEED_ERROR)
  endif
endif

# WORKERS: Dask workers for the real implementation steps of notebooks 06, 07 and 11
# (paperlib.implementations.parallel; default one per core, WORKERS=1 runs them in process with
# no Dask); DASK_SCHEDULER=tcp://host:8786 sends them to an existing Dask cluster instead. The
# results are bitwise the same for any value, so neither is in the params stamp or a cache key.
ifeq ($(origin WORKERS),undefined)
  WORKERS := $(shell nproc 2>/dev/null || echo 1)
endif
DASK_SCHEDULER ?=
ifneq ($(words $(WORKERS)),1)
  $(error WORKERS='$(WORKERS)' is not allowed: use an integer >= 1, e.g. WORKERS=4)
else ifneq ($(subst 0,,$(subst 1,,$(subst 2,,$(subst 3,,$(subst 4,,$(subst 5,,$(subst 6,,$(subst 7,,$(subst 8,,$(subst 9,,$(WORKERS))))))))))),)
  $(error WORKERS='$(WORKERS)' is not allowed: use an integer >= 1, e.g. WORKERS=4)
else ifneq ($(filter 0%,$(WORKERS)),)
  $(error WORKERS='$(WORKERS)' is not allowed: use an integer >= 1, e.g. WORKERS=4)
endif
ifneq ($(words $(DASK_SCHEDULER)),$(if $(strip $(DASK_SCHEDULER)),1,0))
  $(error DASK_SCHEDULER='$(DASK_SCHEDULER)' is not allowed: use a Dask scheduler address such as tcp://host:8786)
else ifneq ($(strip $(DASK_SCHEDULER)),)
  ifeq ($(findstring ://,$(DASK_SCHEDULER)),)
    $(error DASK_SCHEDULER='$(DASK_SCHEDULER)' is not allowed: use a Dask scheduler address such as tcp://host:8786)
  endif
endif
PARALLEL_ENV = WORKERS=$(WORKERS) $(if $(strip $(DASK_SCHEDULER)),DASK_SCHEDULER=$(DASK_SCHEDULER))

# ---------------------------------------------------------------- notebooks
NB_SRC := $(sort $(wildcard notebooks/[0-9]*.py))
NB_NAMES := $(notdir $(basename $(NB_SRC)))
NB_OUT := $(addprefix book/notebooks/,$(addsuffix .ipynb,$(NB_NAMES)))
LIB_SRC := $(shell find paperlib -name '*.py' -not -path '*/__pycache__/*' 2>/dev/null | sort)
PARAMS_STAMP := build/params.txt
# Each executed notebook depends on its source, on the paperlib modules it imports
# (transitively; build/deps/NAME.d, written by `python -m paperlib.artifact.deps` with the system
# python, so no environment is needed to work them out), on booktags (which shapes the
# page), on the lock (package versions), on MODE/DEVICE/SEED, and, when it reads data
# sets, on the listing of the data folders (build/data-stamp.txt).
DEP_FILES := $(addprefix build/deps/,$(addsuffix .d,$(NB_NAMES)))
DATA_STAMP := build/data-stamp.txt
DATA_ROOTS := $(or $(PAPERLIB_DATA),data) $(wildcard $(ROOT)/../shared/data)
NB_GOALS := all figures book grade appendix book/notebooks/%
# "n" under make -n: GNU make puts the one-letter flags first in MAKEFLAGS (as "n" or "-n"); the long options
# ("--no-builtin-rules", added above) never count, although they contain an n
DRY_RUN := $(findstring n,$(patsubst -%,%,$(filter-out --%,$(firstword $(MAKEFLAGS)))))
ifneq ($(filter $(NB_GOALS),$(or $(MAKECMDGOALS),all)),)
  # a dry run (make -n) reads the dependency files that exist and are current, and writes none (make
  # remakes an included makefile even under -n)
  ifneq ($(DRY_RUN),)
    -include $(shell $(PYTHON) -m paperlib.artifact.deps prune --dry-run $(wildcard $(DEP_FILES)))
  else
    # a rule written before a module was deleted or renamed (a checkout updated by git pull) is deleted
    # first, so make writes it again instead of stopping at the missing file
    _PRUNED := $(shell $(PYTHON) -m paperlib.artifact.deps prune $(wildcard $(DEP_FILES)))
    -include $(DEP_FILES)
  endif
endif

.PHONY: all figures book test bench sync clean distclean env env-check help FORCE grade appendix dist \
	test-book browser-deps

# After the book: record this run's total, rewrite the appendix with it, and refresh that
# one page (an incremental build), so the book's appendix includes the run that built it.
all: book
	@$(PY) -m paperlib.artifact.runlog tier --mode $(MODE) --device $(DEVICE) --start $(START_TS) --notebooks $(words $(NB_NAMES))
	@$(PY) -m paperlib.artifact.appendix > /dev/null
	@$(JB) build book -q -W -n > build/book-refresh.log 2>&1 || { tail -30 build/book-refresh.log >&2; \
	  echo "error: refreshing the appendix page failed (log: build/book-refresh.log)" >&2; exit 1; }
	@echo
	@echo "Done (MODE=$(MODE), DEVICE=$(DEVICE), SEED=$(SEED))."
	@echo "  book:    file://$(ROOT)/book/_build/html/index.html"
	@echo "  figures: $(ROOT)/figures/"
	@echo "  results: $(ROOT)/results/"
	@echo "  appendix: $(ROOT)/results/artifact_appendix.md"
	@echo
	@$(PY) -m paperlib.artifact.claims --show

help:
	@sed -n '3,/^$$/{/^$$/!p;}' $(ROOT)/Makefile | sed 's/^# \{0,1\}//'

env: $(ENV_TARGET)

# Fresh .venv from the lock; re-installs only when pyproject.toml or the lock changes.
.venv/.installed: pyproject.toml requirements-lock.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "paperlib needs Python >= 3.11; found " + sys.version.split()[0] + " (set PYTHON=python3.11)")'
	@test -x .venv/bin/python || { echo "Creating .venv with $(PYTHON) -m venv .venv"; $(PYTHON) -m venv .venv; }
	@echo "Installing the locked environment into .venv (requirements-lock.txt, then paperlib -e)"
	@start=$$(date +%s); \
	.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-lock.txt && \
	.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e . && \
	.venv/bin/python -c 'import json, os, sys; b = sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(".venv") for f in fs); json.dump({"wall_s": int(sys.argv[1]), "bytes": b}, open(".venv/install-record.json", "w"))' $$(( $$(date +%s) - start ))
	@touch $@

# An active env is used as it is; the locked set is installed into it only if
# paperlib (or a tool the Makefile calls) cannot be imported from outside the repo.
env-check:
	@test -x "$(PY)" || { echo "error: active environment has no $(PY)" >&2; exit 1; }
	@if ! (cd / && "$(PY)" -c 'import paperlib, papermill, jupytext, nbval, pytest, ipykernel, jupyter_book, torch, playwright') >/dev/null 2>&1; then \
	  echo "paperlib or its tools are not importable in the active environment ($(PY)); installing the locked set into it"; \
	  "$(PY)" -m pip install --disable-pip-version-check -r requirements-lock.txt; \
	  "$(PY)" -m pip install --disable-pip-version-check --no-deps -e .; \
	fi

# ipykernel's own log is cut to errors: its "running over TCP without encryption" warning
# (the kernel talks to papermill on this machine only) would otherwise open every notebook.
$(KERNEL_SPEC): Makefile | $(ENV_TARGET)
	@mkdir -p $(dir $@)
	@$(PY) -c 'import json, sys; json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--IPKernelApp.log_level=ERROR"], "display_name": "Python (paperlib)", "language": "python", "metadata": {"debugger": False}}, open(sys.argv[1], "w"), indent=1)' $@

# Rewritten only when MODE/DEVICE/SEED change, so executed notebooks re-run exactly then.
$(PARAMS_STAMP): FORCE | $(ENV_TARGET)
	@mkdir -p $(dir $@)
	@if [ "$(CUDA_AVAILABLE)" = error ]; then echo "warning: could not import torch with $(PY) to detect CUDA" >&2; fi
	@if [ "$(DEVICE)" = cuda ] && [ "$(CUDA_AVAILABLE)" != 1 ]; then \
	  echo "error: DEVICE=cuda is not available: torch.cuda.is_available() is not True with $(PY); use DEVICE=cpu" >&2; exit 1; fi
	@if [ "$(MODE_SRC)" = auto ]; then \
	  if [ "$(CUDA_AVAILABLE)" = 1 ]; then echo "MODE=$(MODE) (CUDA GPU found; use MODE=quick for the few-minute CPU version)"; \
	  else echo "MODE=$(MODE) (no CUDA GPU found; use MODE=full on a GPU for paper-size runs)"; fi; \
	else echo "MODE=$(MODE) (set by you)"; fi
	@echo "DEVICE=$(DEVICE) SEED=$(SEED)"
	@if [ "$(MODE)" = full ] && [ "$(DEVICE)" = cpu ]; then echo "warning: MODE=full on the CPU runs the paper-size experiments and can take many hours" >&2; fi
	@printf 'MODE=%s\nDEVICE=%s\nSEED=%s\n' '$(MODE)' '$(DEVICE)' '$(SEED)' > $@.new
	@if cmp -s $@.new $@; then rm -f $@.new; else mv -f $@.new $@; fi

build/deps/%.d: notebooks/%.py $(LIB_SRC)
	@mkdir -p $(dir $@)
	@$(PYTHON) -m paperlib.artifact.deps make $< --target book/notebooks/$*.ipynb --out $@ --data-stamp $(DATA_STAMP)

# Rewritten only when a file under the data folders appears, changes or goes.
$(DATA_STAMP): FORCE
	@$(PYTHON) -m paperlib.artifact.deps data-stamp --out $@ $(DATA_ROOTS)

figures: $(NB_OUT)
	@if [ -z "$(NB_OUT)" ]; then echo "No notebooks/NN_*.py found."; fi

# notebooks/NAME.py --jupytext--> build/nb_in/NAME.ipynb --papermill--> book/notebooks/NAME.ipynb
# papermill writes into a temporary file beside the target, renamed when the run succeeds:
# an interrupted or failed run never leaves a notebook that looks complete.
# A result a notebook wrote that can no longer be read back (truncated, corrupted, deleted)
# re-runs that notebook: `python -m paperlib.artifact.resultcheck` (system python, standard
# library only; once per make) removes the file, says so, and touches
# build/results-check/NAME.stamp and, when it touched any, build/results-check/all.txt.
RESULTS_CHECK := build/results-check/all.txt
RESULT_STAMPS := $(addprefix build/results-check/,$(addsuffix .stamp,$(NB_NAMES)))
$(RESULTS_CHECK): FORCE
	@$(PYTHON) -m paperlib.artifact.resultcheck stamps --dir $(dir $@) $(NB_NAMES)
$(RESULT_STAMPS): build/results-check/%.stamp: $(RESULTS_CHECK)
	@:

book/notebooks/%.ipynb: notebooks/%.py paperlib/artifact/booktags.py requirements-lock.txt $(PARAMS_STAMP) build/results-check/%.stamp | $(KERNEL_SPEC) $(ENV_TARGET)
	@grep -Eq '^# %%.*tags=\[[^]]*"parameters"' $< || { echo "error: $< has no cell tagged \"parameters\" (write '# %% tags=[\"parameters\"]' above MODE/DEVICE/SEED)" >&2; exit 1; }
	@mkdir -p build/nb_in $(dir $@)
	@echo "== executing $< (MODE=$(MODE) DEVICE=$(DEVICE) SEED=$(SEED))"
	@$(JUPYTEXT) --quiet --to ipynb $< -o build/nb_in/$*.ipynb
	@rm -f $(dir $@).$*.tmp.ipynb
	@start=$$(date +%s); \
	rm -f build/peak/$*.json; \
	if env -u MPLBACKEND $(PARALLEL_ENV) $(JUPYTER_ENV) $(PY) -m paperlib.artifact.runlog measure --out build/peak/$*.json -- \
	    $(PAPERMILL) build/nb_in/$*.ipynb $(dir $@).$*.tmp.ipynb \
	    -k $(KERNEL_NAME) --language python --cwd $(ROOT) -p MODE $(MODE) -p DEVICE $(DEVICE) -p SEED $(SEED); then \
	  $(PY) -m paperlib.artifact.booktags $(dir $@).$*.tmp.ipynb; \
	  mv -f $(dir $@).$*.tmp.ipynb $@; \
	  wall=$$(( $$(date +%s) - start )); \
	  $(PY) -m paperlib.artifact.runlog notebook $* --mode $(MODE) --device $(DEVICE) --seed $(SEED) --start $$start --wall $$wall \
	    --peak-file build/peak/$*.json; \
	  echo "== $< done in $$wall s -> $@"; \
	else \
	  msg="error: notebook $< failed (MODE=$(MODE) DEVICE=$(DEVICE) SEED=$(SEED))"; \
	  if [ -f $(dir $@).$*.tmp.ipynb ]; then mkdir -p build/failed; mv -f $(dir $@).$*.tmp.ipynb build/failed/$*.ipynb; \
	    msg="$$msg; the partial run is in build/failed/$*.ipynb"; \
	    msg="$$msg"$$'\n'"  failed at $$($(PY) -m paperlib.artifact.runlog failed build/failed/$*.ipynb)"; fi; \
	  echo "$$msg" >&2; \
	  exit 1; \
	fi

# The graded claims (results/grade.json, book/grade.md) are written before the book is built.
# (quiet under `make all`, which prints the table once at the end)
grade: figures | $(ENV_TARGET)
	$(PY) -m paperlib.artifact.claims $(if $(filter all,$(or $(MAKECMDGOALS),all)),--quiet)

# The artifact appendix (book/appendix.md, results/artifact_appendix.md) from the claims
# registry, the grade and the measured runs.
appendix: grade | $(ENV_TARGET)
	$(PY) -m paperlib.artifact.appendix

# ARTIFACT-APPENDIX.md at the repository's root: the PETS-form appendix of the last run, kept as a committed
# snapshot (make all writes the current one to results/ARTIFACT-APPENDIX.md).
.PHONY: appendix-snapshot
appendix-snapshot: | $(ENV_TARGET)
	$(PY) -m paperlib.artifact.appendix --no-book --snapshot ARTIFACT-APPENDIX.md

# What a Zenodo upload takes (paperlib/artifact/dist.py): the commit's source archive, the built book,
# the PETS-form appendix, .zenodo.json with this version and commit, and SHA256SUMS, in dist/.
dist: | $(ENV_TARGET)
	$(PY) -m paperlib.artifact.dist --root $(ROOT)

# book/build_info.md (git-ignored, included by the landing page): which mode, device, seed and
# commit built this book, and when.
book: grade appendix | $(ENV_TARGET)
	@commit=$$(git -C $(ROOT) rev-parse --short=12 HEAD 2>/dev/null || echo unknown); \
	dirty=$$(git -C $(ROOT) status --porcelain --untracked-files=no 2>/dev/null | head -1); \
	printf '%s\n' '```{admonition} How this copy of the book was built' ':class: note' \
	  "\`make all MODE=$(MODE) DEVICE=$(DEVICE) SEED=$(SEED)\` at commit \`$$commit\`$${dirty:+ (with uncommitted changes)}, $$(date -u '+%Y-%m-%d %H:%M UTC'). Every figure's caption repeats its own mode and commit." \
	  '```' > book/build_info.md
	@$(PY) -m paperlib.artifact.site stage --root $(ROOT) --results $(or $(PAPERLIB_RESULTS),$(ROOT)/results) --out book/_extra
	@echo "== building the book (jupyter-book, warnings are errors)"
	@start=$$(date +%s); \
	$(JB) build book -q -W -n --all; \
	$(PY) -m paperlib.artifact.runlog book --mode $(MODE) --wall $$(( $$(date +%s) - start ))
	@echo "Book: file://$(ROOT)/book/_build/html/index.html"

# Notebooks are paired with notebooks/jupytext.toml (ipynb + py:percent).
sync: | $(ENV_TARGET)
	@if [ -n "$(NB_SRC)" ]; then $(JUPYTEXT) --quiet --sync $(NB_SRC); else echo "No notebooks/NN_*.py to sync."; fi

# tests/ plus every paired notebook executed once more by nbval, spread over TEST_WORKERS
# pytest-xdist workers (--dist loadfile: a notebook's cells stay in order on one worker), in
# this environment's kernel. Before that, the whole pipeline (papermill, grade, appendix,
# jupyter-book -W) builds the book in smoke mode in a copy under build/testbook/, which
# tests/artifact/test_book_browser.py opens in headless Chromium (screenshots in
# build/screenshots/). nbval then runs each notebook with the smoke parameters injected
# (papermill --prepare-only into build/test/nb/) against the test book's results folder: the
# path an interrupted or partly re-run `make all` takes, every result read back from the
# cache and checked, never recomputed unless it can no longer be read. Quick mode itself is
# what `make all` runs.
TESTBOOK := $(ROOT)/build/testbook
# pytest-xdist workers for `make test` (one notebook or test file per worker at a time)
TEST_WORKERS ?= 2
# extra pytest options for `make test` (e.g. PYTEST_ARGS=--durations=30)
PYTEST_ARGS ?=
NBVAL_NB := $(addprefix build/test/nb/,$(addsuffix .ipynb,$(NB_NAMES)))
test: lint sync test-book browser-deps | $(KERNEL_SPEC) $(ENV_TARGET)
	@rm -rf build/test && mkdir -p build/test/nb
	@for nb in $(NB_NAMES); do \
	  $(JUPYTER_ENV) $(PAPERMILL) --prepare-only notebooks/$$nb.ipynb build/test/nb/$$nb.ipynb -k $(KERNEL_NAME) \
	    --language python -p MODE smoke -p DEVICE cpu -p SEED 0 --log-level WARNING || exit 1; \
	done
	@rc=0; env -u MPLBACKEND JUPYTER_PLATFORM_DIRS=1 PYDEVD_DISABLE_FILE_VALIDATION=1 \
	  PAPERLIB_RESULTS=$(TESTBOOK)/results PAPERLIB_FIGURES=$(ROOT)/build/test/figures \
	  PAPERLIB_BOOK_HTML=$(TESTBOOK)/book/_build/html PAPERLIB_BOOK_FIGURES=$(TESTBOOK)/figures \
	  PAPERLIB_REQUIRE_BROWSER=$${PAPERLIB_REQUIRE_BROWSER:-$$(command -v chromium >/dev/null 2>&1 && echo 1 || echo 0)} \
	  $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS) tests $(if $(NB_SRC),--nbval-lax --nbval-current-env $(NBVAL_NB)) \
	  2>&1 | tee build/test/pytest.log || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests (exit status 5): tests/ or the notebooks are missing" >&2; fi; \
	if [ $$rc -eq 0 ]; then $(PY) -m paperlib.artifact.runlog test --wall $$(( $$(date +%s) - $(START_TS) )) \
	  --summary "$$(grep -E '^=+ .*(passed|failed).* in ' build/test/pytest.log | tail -1 | tr -d '=' | sed 's/^ *//;s/ *$$//')"; fi; \
	exit $$rc

# make test with the CPUs kept busy: LOAD_PROCS (default 2) busy loops at normal priority run
# for as long as `make test` does (they end with it, also on failure or Ctrl-C), so that a
# test that depends on the machine's speed fails here first. LOAD_CORES=1 pins the test
# run to one core instead (taskset), with the busy loops on the same core. Prints the time
# and the load average at the end.
LOAD_PROCS ?= 2
LOAD_CORES ?=
.PHONY: test-loaded
test-loaded: | $(ENV_TARGET)
	@pin=""; if [ -n "$(LOAD_CORES)" ]; then \
	  command -v taskset >/dev/null 2>&1 || { echo "error: LOAD_CORES needs taskset (util-linux)" >&2; exit 2; }; \
	  pin="taskset -c 0-$$(( $(LOAD_CORES) - 1 ))"; fi; \
	busy=(); for i in $$(seq 1 $(LOAD_PROCS)); do $$pin bash -c 'while :; do :; done' & busy+=($$!); done; \
	trap 'kill $${busy[@]} 2>/dev/null; wait $${busy[@]} 2>/dev/null || true' EXIT; \
	echo "== make test with $(LOAD_PROCS) busy loops$${pin:+ on cores 0-$$(( $(LOAD_CORES) - 1 ))} (pids $${busy[*]}; load average now: $$(cut -d' ' -f1-3 /proc/loadavg))"; \
	start=$$(date +%s); rc=0; $$pin $(MAKE) --no-print-directory test || rc=$$?; \
	echo "== make test under load: status $$rc after $$(( $$(date +%s) - start )) s; load average $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	exit $$rc

# The sources the book needs, copied (not the outputs), then `make book MODE=smoke` there
# with this environment; results/figures/book outputs stay inside build/testbook/ (the
# notebooks are then re-executed from that results cache by nbval in `make test`).
test-book: | $(ENV_TARGET)
	@rm -rf $(TESTBOOK) && mkdir -p $(TESTBOOK)/book
	@cp -R Makefile pyproject.toml requirements-lock.txt README.md THEORY.md DATA-LICENSE.md LICENSE CITATION.cff \
	  .zenodo.json notebooks paperlib tests $(TESTBOOK)/
	@cd book && cp -R $$(ls -A | grep -v -x -e _build -e _extra -e notebooks -e grade.md -e appendix.md -e build_info.md) $(TESTBOOK)/book/
	@echo "== building the test book (MODE=smoke) in $(TESTBOOK)"
	@env -u MAKEFLAGS -u MFLAGS VIRTUAL_ENV=$(abspath $(BIN)/..) PAPERLIB_RESULTS=$(TESTBOOK)/results \
	    PAPERLIB_FIGURES=$(TESTBOOK)/figures $(MAKE) --no-print-directory -C $(TESTBOOK) book MODE=smoke SEED=0 \
	    > $(ROOT)/build/testbook.log 2>&1 || { tail -40 $(ROOT)/build/testbook.log >&2; \
	    echo "error: the smoke-mode book did not build (full log: build/testbook.log)" >&2; exit 1; }
	@echo "== test book built in $(TESTBOOK)/book/_build/html"

# Debian's chromium for the browser test: installed when missing and apt-get can run as
# root; otherwise the test is skipped with a message (PAPERLIB_REQUIRE_BROWSER=1 fails it).
browser-deps:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Installing Debian's chromium for the browser test (apt-get)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	    || echo "warning: could not install chromium; the browser test will be skipped" >&2; \
	else echo "note: chromium is not installed and cannot be installed here (needs root and apt-get);" \
	  "the browser test will be skipped" >&2; fi

bench: | $(ENV_TARGET) $(PARAMS_STAMP)
	@shopt -s nullglob; files=(bench/bench_*.py); \
	if [ $${#files[@]} -eq 0 ]; then echo "No bench/bench_*.py scripts."; exit 0; fi; \
	for f in "$${files[@]}"; do \
	  echo "== $$f (MODE=$(MODE) DEVICE=$(DEVICE) SEED=$(SEED))"; \
	  MODE=$(MODE) DEVICE=$(DEVICE) SEED=$(SEED) $(PY) "$$f" || { echo "error: $$f failed" >&2; exit 1; }; \
	done

# Refresh the stored Opacus code-audit table (Table 2): list the releases on the package
# index, download missing wheels into .cache/opacus-src/ (or PAPERLIB_CACHE/opacus-src/), re-audit
# their source, confirm each by a real step; rewrites paperlib/resources/opacus_table2.json. Needs the network.
.PHONY: opacus-table
opacus-table: | $(ENV_TARGET)
	$(PY) -m paperlib.implementations.opacus_code --refresh --confirm all

# ================================================================ lint (issue 13)
# Workflows, container recipe and citation metadata, checked with pinned tools that live in
# their own venv (build/lint-venv/, from requirements-lint.txt; re-installed only when that
# file changes), never in .venv: cffconvert 2.0.0 needs jsonschema<4, which the book
# toolchain cannot share. zizmor runs offline with its "pedantic" persona; the findings
# accepted on purpose are listed, with reasons, in .github/zizmor.yml and .hadolint.yaml.
LINT_VENV := build/lint-venv
LINT_BIN := $(LINT_VENV)/bin
LINT_STAMP := $(LINT_VENV)/.installed
.PHONY: lint
$(LINT_STAMP): requirements-lint.txt
	@echo "Installing the linters into $(LINT_VENV) (requirements-lint.txt)"
	@rm -rf $(LINT_VENV)
	@$(PYTHON) -m venv $(LINT_VENV)
	@$(LINT_BIN)/python -m pip install -q --disable-pip-version-check --no-cache-dir -r requirements-lint.txt
	@touch $@

lint: $(LINT_STAMP)
	@echo "== lint: actionlint, zizmor, hadolint, cffconvert"
	@$(LINT_BIN)/actionlint -no-color -config-file .github/actionlint.yaml
	@$(LINT_BIN)/zizmor --offline --no-progress --color never --persona pedantic -q .github/workflows
	@$(LINT_BIN)/hadolint --no-color --config .hadolint.yaml Dockerfile
	@$(LINT_BIN)/cffconvert --validate -i CITATION.cff
# ================================================================ end of lint

# ================================================================ device check (issue 13)
# One prepared script (bench/device_check.py): runs every code path that full mode sends to
# the GPU at full-mode sizes on a slice of each notebook, compares CUDA with the CPU for the
# same seeds (in law where random, to 1e-9 where deterministic), measures per-trial and
# per-point costs and extrapolates `make all MODE=full` per notebook. Writes
# results/device_check.json and .md and prints the table. MODE/DEVICE/SEED as everywhere
# (auto: MODE=full DEVICE=cuda on a CUDA machine); on the CPU it compares CPU with CPU.
.PHONY: device-check
device-check: | $(ENV_TARGET)
	@MODE=$(MODE) DEVICE=$(DEVICE) SEED=$(SEED) $(PY) bench/device_check.py
# ================================================================ end of device check

clean:
	rm -rf build results figures book/_build book/notebooks book/grade.md book/appendix.md book/build_info.md

distclean: clean
	rm -rf .venv

FORCE:
