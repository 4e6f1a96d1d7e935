# Two commands on a fresh machine: `make up` runs the cluster, `make test` runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test test-fast lint proto install clean bench image

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

up: $(STAMP)
	$(BIN)/kse up $(ARGS)

# The whole suite, in parallel (every test picks its own ports and data dirs). Twice as many
# workers as cores: the integration and chaos tests mostly wait on real processes, leases and
# timers (with one worker per core the 2-core CI machine was 30-60 % busy for most of the run).
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -n $(PYTEST_WORKERS) -q -p no:cacheprovider --durations=15 $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/pytest -q tests/unit $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. proto/kse.proto

bench: $(STAMP)
	$(BIN)/kse bench apiserver

# The container image for docker-compose.yml (BASE_IMAGE=..., IMAGE=... override; see docker/build-image.sh).
image: $(STAMP)
	PIP=$(BIN)/pip docker/build-image.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
