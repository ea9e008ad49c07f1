# gapscope: harness -> scripts -> traces -> analysis -> study (the project's own, not shipped).
# `make demo` and `make test` set everything up on a fresh machine (a venv in .venv/).
# On the GPU machine, where nothing can be installed, pass NO_VENV=1 to run from the source tree
# with the machine's own python3 (docs/PROFILING.md, "On a machine where nothing can be installed").

PYTHON ?= python3
VENV   ?= .venv
# CPU build for tests; it lies on disk on these machines. Never installed over an existing torch.
TORCH  ?= torch==2.13.0
VARIANT ?= pipelined
ARGS   ?=
# make profile RUNS=N: N captures of one configuration (compare them for the between-run spread).
RUNS   ?= 1
# make profile TP=N: one capture per rank of a tensor-parallel run (scripts/profile-tp.sh).
TP     ?= 1
DEMO_TRACES ?= $(addprefix tests/data/runs/,static pipelined compiled pipelined-compile graphed-sync graphed fused)

# Python keeps each module it compiles (__pycache__), unless PYTHONDONTWRITEBYTECODE is set (this
# machine and CI set it): a venv by uv holds no bytecode, so every process would compile what it
# imports again, each time (`gapscope --help` compiling click, `analyze` pandas and numpy). So
# each venv is byte-compiled when it is set up, on every core: every package in it and our own
# three, but what SKIP_COMPILE names, compiled as first imported: transformers (the tests import a
# few hundred of its thousands of modules), the packages' own test folders (pandas' and numpy's,
# 2,500 files nothing imports), pip, setuptools, fontTools and pygments (no test imports them):
# 16 s of set-up instead of 22 on two cores. What a `make` run compiles it keeps
# (PYTHONDONTWRITEBYTECODE is not passed on).
unexport PYTHONDONTWRITEBYTECODE
SKIP_COMPILE ?= site-packages/(transformers|pip|setuptools|fontTools|pygments)/|site-packages/.+/tests?/

ifdef NO_VENV
PY := $(PYTHON)
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
ANALYSIS_DEPS :=
HARNESS_DEPS :=
else
PY := $(VENV)/bin/python
ANALYSIS_DEPS := $(VENV)/.analysis
HARNESS_DEPS := $(VENV)/.harness
endif
# The venv's packages and ours into bytecode (a file that does not compile is left to its import).
COMPILE = $(PY) -m compileall -qq -j 0 -x '$(SKIP_COMPILE)' \
  "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" analysis harness study || :
export GAPSCOPE_PYTHON := $(PY)

.PHONY: install install-analysis test test-gpu demo lint clean profile profile-all doctor study

install: $(HARNESS_DEPS)
install-analysis: $(ANALYSIS_DEPS)

# A torch already installed for $(PYTHON) (a CUDA build, say) is kept: the venv then sees it.
$(VENV)/bin/python:
	@if $(PYTHON) -c 'import torch' 2>/dev/null; then \
	  echo "gapscope: using the torch already installed for $(PYTHON)"; \
	  $(PYTHON) -m venv --system-site-packages $(VENV); \
	else $(PYTHON) -m venv $(VENV); fi

# The analysis alone, by uv where it installs (below), else pip; no torch either way.
$(VENV)/.analysis: $(VENV)/bin/python pyproject.toml
	@if $(PY) -m pip install -qq uv 2>/dev/null && $(VENV)/bin/uv pip install -q --python $(PY) -e .; \
	then :; else $(PY) -m pip install -qq --no-compile -e .; fi
	@$(COMPILE)
	@touch $@

# One resolution. In a venv with no torch, by uv (pip-installed into the venv first): it fetches
# and unpacks in parallel: 12 s here, uv's own install included, where pip took 41. uv does not see a torch from
# --system-site-packages and would fetch another over it, so a venv that has one (and any
# machine where uv does not install, or fails) takes pip, torch left out where there is one.
# Byte-compiled after, as above.
$(VENV)/.harness: $(VENV)/bin/python pyproject.toml
	@if $(PY) -c 'import torch' 2>/dev/null; then \
	  $(PY) -m pip install -qq --no-compile -e '.[harness,dev]'; \
	elif $(PY) -m pip install -qq uv 2>/dev/null && $(VENV)/bin/uv pip install -q --python $(PY) \
	    $$(for l in $$PIP_FIND_LINKS; do echo --find-links $$l; done) '$(TORCH)' -e '.[harness,dev]'; \
	then :; else $(PY) -m pip install -qq --no-compile '$(TORCH)' -e '.[harness,dev]'; fi
	@$(COMPILE)
	@touch $(VENV)/.analysis $@

# The main job on an embedded default: with no GPU, compare the bundled real H200 captures.
demo: $(ANALYSIS_DEPS)
	@$(PY) -m analysis.cli compare $(DEMO_TRACES)
	@$(PY) -m analysis.cli report $(DEMO_TRACES) -o out/demo --perfetto out/demo/timeline.json --force

# Two workers, a test file each at a time (a file's fixtures set up once): the tests are one
# core's work each (torch on one thread, tests/conftest.py). Without pytest-xdist (NO_VENV on a
# machine that lacks it), one process.
test: $(HARNESS_DEPS)
	$(PY) -m pytest $$($(PY) -c 'import xdist' 2>/dev/null && echo '-n 2 --dist loadfile')

test-gpu: $(HARNESS_DEPS)
	$(PY) -m pytest -m gpu -v

lint: $(HARNESS_DEPS)
	$(PY) -m ruff check harness analysis study tests

profile: $(HARNESS_DEPS)
	@for i in $$(seq $(RUNS)); do \
	  echo "gapscope: make profile: capture $$i of $(RUNS)" >&2; \
	  if [ "$(TP)" = 1 ]; then bash scripts/profile.sh $(VARIANT) $(ARGS) || exit $$?; \
	  else bash scripts/profile-tp.sh $(VARIANT) $(TP) $(ARGS) || exit $$?; fi; \
	done

profile-all: $(HARNESS_DEPS)
	bash scripts/profile-all.sh $(ARGS)

doctor: $(ANALYSIS_DEPS)
	$(PY) -m analysis.cli doctor

study: $(HARNESS_DEPS)
	bash scripts/study.sh $(ARGS)

clean:
	rm -rf $(VENV) out build dist *.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
