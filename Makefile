# The two commands of the README: `make up` and `make test`. Both install what they need.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install redis up down status key test bench

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip<26.3"  # chalice 1.34 wants pip<26.3
	$(PY) -m pip install -q -r requirements-dev.txt
	@touch $@

# Redis (ElastiCache's stand-in): the redis-server on PATH, else Debian's package.
redis:
	@command -v redis-server >/dev/null || { \
	  echo "installing redis-server with apt-get"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq redis-server >/dev/null; }

up: install redis
	@$(PY) localstack/stack.py up

down:
	@$(PY) localstack/stack.py down

status:
	@$(PY) localstack/stack.py status

key:
	@[ -n "$(ORG)" ] && [ -n "$(USER)" ] || { echo "usage: make key ORG=<org> USER=<user>"; exit 2; }
	@$(PY) localstack/stack.py key "$(ORG)" "$(USER)"

test: install redis
	@$(PY) localstack/stack.py up --no-demo >/dev/null
	$(PY) -m pytest $(PYTEST_ARGS)

# The benchmarks and docs/benchmarks.md (`make bench QUICK=1` checks the harness in about two minutes).
bench: install redis
	@$(PY) localstack/stack.py up --no-demo >/dev/null
	@$(PY) bench/report.py $(if $(QUICK),--quick)
