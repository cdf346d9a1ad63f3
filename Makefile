# openmsprof — the two commands of the README install what they need into .venv themselves.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-deps lint typecheck bench clean sanitize

$(STAMP): pyproject.toml setup.py src/openmsprof/recorder/_ring.c src/openmsprof/export/msprof/_task_lines.c src/openmsprof/parse/_bulk_insert.c src/openmsprof/sources/_ort_scan.c src/openmsprof/sources/_kineto_scan.c src/openmsprof/export/ascend_pt/_row_text.c src/openmsprof/export/ascend_pt/_nest_sweep.c src/openmsprof/export/ascend_pt/_perfetto_fit.c src/openmsprof/export/ascend_pt/_summary_cols.c
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# The Estimator mode of seed 003 needs TensorFlow <= 2.15 + tensorflow-estimator: a second venv.
PY311 ?= python3.11
TF215 := .venv-tf215
$(TF215)/.installed: pyproject.toml
	$(PY311) -m venv $(TF215)
	$(TF215)/bin/pip install -q 'tensorflow-cpu==2.15.1' 'tensorflow-estimator==2.15.0' 'numpy<2'
	$(TF215)/bin/pip install -q -e .
	touch $(TF215)/.installed

# Reference clients the tests run against (Perfetto's trace_processor_shell, torch_npu's analysis),
# fetched once here, never while the tests run (tests/fetch_refclients.py).
REF := $(VENV)/refclients
$(REF)/.installed: tests/fetch_refclients.py $(STAMP)
	$(BIN)/python tests/fetch_refclients.py $(REF)

demo: $(STAMP)
	$(BIN)/python -m openmsprof demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite runs on a plain clone (the seeds' facts are in tests/conformance/seed_facts); pytest's
# last lines are the slowest tests and one line naming what was skipped and the command that installs it.
# TEST_WORKERS=N runs the test files on N pytest-xdist workers (a file's tests stay together); the
# fork_policy tests, which need a process with no other thread, run first on their own, serially.
TEST_WORKERS ?=
test: $(STAMP) $(TF215)/.installed $(REF)/.installed
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy
	$(if $(TEST_WORKERS),$(BIN)/python -m pytest -q -p no:cacheprovider -m fork_policy)
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=15 \
		$(if $(TEST_WORKERS),-n $(TEST_WORKERS) --dist loadfile -m "not fork_policy")
	$(MAKE) sanitize

# The C extensions built with ASan+UBSan into build/sanitize; the recorder, C-extension and fuzz tests against them.
sanitize: $(STAMP)
	$(BIN)/python -m tests.sanitize

# What the skipped tests need from the system (root; .ci/run does this): an OpenSSH server for the
# remote-collect tests (started as a user-level sshd on a free loopback port) and Chromium.
test-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client chromium

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
