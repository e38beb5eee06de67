# The two commands of the README. Both create .venv and install dynbucket into it first
# (the exact versions of constraints.txt, within pyproject.toml's ranges);
# the tests also create .venv-readers: third-party Hudi readers that need a pyarrow older
# than the project's (daft), run by the tests in a subprocess.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# The package is installed as a tree of links to the source files (setuptools' strict
# editable mode), not through a path finder: a folder named dynbucket/ in the working
# directory (a clone, say) would otherwise shadow the install as an empty namespace package.
# A link per file, so a module added or removed relinks (a few seconds, no dependencies).
LINKS  := $(VENV)/.linked-$(shell find pipeline actors -name '*.py' | sort | cksum | cut -d' ' -f1)
READERS := .venv-readers
# Installs into the venv of the python named after it, with uv (pinned in constraints.txt,
# put into .venv by pip): the same packages as pip in a third of the time (CI installs both
# venvs on every run). uv reads no pip.conf: where an index is reachable only through
# pip's settings, each step falls back to pip.
INSTALL = $(VENV)/bin/uv pip install -q --python
READERS_PINS := daft==0.7.26 sortedcontainers==2.4.0
READERS_STAMP := $(READERS)/.installed-$(shell echo '$(READERS_PINS)' | cksum | cut -d' ' -f1)

.PHONY: demo test test-long lint docs clean

demo: $(LINKS)
	$(VENV)/bin/dynbucket demo $(ARGS)

# Three sessions, one seed (scripts/run-tests): the integration and property tests on one
# embedded Ray + Spark, then the unit tests beside tests/cluster on a multi-node Ray
# cluster (Ray's test cluster: a head and two worker nodes on this machine).
test: $(LINKS) $(READERS_STAMP)
	scripts/run-tests $(ARGS)

# Today's full counts of the sampled sequences (the suite samples them by a seed that
# changes per run): the fault sequences of every case, 20 runs of each writers model,
# 30 Spark workloads (3 on the cluster), 80 table-model and 24 global-model sequences,
# every case of each family marked `sample`; then the speed guard (the main job's ratios
# against docs/bench-kept.json, `pipeline/bench/guard.py`).
test-long: $(LINKS) $(READERS_STAMP)
	DYNBUCKET_SAMPLE=all DYNBUCKET_FAULT_WRITES=all DYNBUCKET_FLAKY_RUNS=20 DYNBUCKET_WRITERS_RUNS=20 \
	DYNBUCKET_MODEL_WORKLOADS=30 DYNBUCKET_FILTER_SEQUENCES=20 \
	DYNBUCKET_MODEL_SEQUENCES=80 DYNBUCKET_GLOBAL_SEQUENCES=24 \
	DYNBUCKET_CLUSTER_WORKLOADS=3 scripts/run-tests $(ARGS)
	$(VENV)/bin/dynbucket bench upsert --sizes 5e6 --upsert-rows 1e6 --runs 5 \
		--systems dynbucket,spark,inprocess,floor --guard docs/bench-kept.json

# The docs site into site/, every warning an error (tests/unit/test_docs.py builds it too).
docs: $(LINKS)
	$(VENV)/bin/python scripts/docs-src
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: $(LINKS)
	$(VENV)/bin/pip install -q -c constraints.txt ruff mypy
	$(VENV)/bin/ruff check actors pipeline tests
	$(VENV)/bin/ruff format --check actors pipeline tests
	$(VENV)/bin/python scripts/typecheck

$(STAMP):
	scripts/ensure-java
	$(PYTHON) scripts/check-python.py
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q -c constraints.txt uv || true
	$(INSTALL) $(VENV)/bin/python -c constraints.txt -e '.[test]' -C editable_mode=strict \
		|| $(VENV)/bin/python -m pip install -q -c constraints.txt -e '.[test]' \
			--config-settings editable_mode=strict
	rm -f $(VENV)/.installed-* $(VENV)/.linked-*
	touch $(LINKS) $@

$(LINKS): $(STAMP)
	test -f $@ || $(INSTALL) $(VENV)/bin/python --no-deps -c constraints.txt -e . -C editable_mode=strict \
		|| $(VENV)/bin/python -m pip install -q --no-deps -c constraints.txt -e . \
			--config-settings editable_mode=strict
	rm -f $(VENV)/.linked-*
	touch $@

$(READERS_STAMP): | $(STAMP)
	test -d $(READERS) || $(PYTHON) -m venv $(READERS)
	$(INSTALL) $(READERS)/bin/python $(READERS_PINS) || $(READERS)/bin/python -m pip install -q $(READERS_PINS)
	rm -f $(READERS)/.installed-*
	touch $@

clean:
	rm -rf $(VENV) $(READERS) build site *.egg-info
