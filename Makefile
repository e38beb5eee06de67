# The two commands of the README. Both create .venv and install dynbucket into it first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint clean

demo: $(STAMP)
	$(VENV)/bin/dynbucket demo $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/pip install -q ruff mypy
	$(VENV)/bin/ruff check actors pipeline tests
	$(VENV)/bin/mypy actors pipeline

$(STAMP):
	scripts/ensure-java
	$(PYTHON) scripts/check-python.py
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

clean:
	rm -rf $(VENV) build *.egg-info
