# hookmesh — every target installs what it needs; `make demo` and `make test` are the two entry points.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LLM_STAMP := $(VENV)/.llm-installed
NODE_DIR := clients/node
NODE_STAMP := $(NODE_DIR)/node_modules/.package-lock.json
PROTOS := $(wildcard protos/hookmesh/v1/*.proto)
GEN_DIR := src

# A venv made for another checkout (this one copied with `cp -a`, or moved) imports that
# checkout's src/ through its editable install. It is removed here, so the rules below build
# one for this tree (asked without running any hookmesh code, PYTHON* variables ignored).
VENV_SRC := $(shell [ -x $(BIN)/python ] && $(BIN)/python -I -c \
	'import importlib.util as u; s = u.find_spec("hookmesh"); print(s.origin if s else "")' 2>/dev/null)
ifneq ($(wildcard $(STAMP)),)
ifneq ($(realpath $(VENV_SRC)),$(realpath src/hookmesh/__init__.py))
$(info $(VENV) runs $(or $(VENV_SRC),no hookmesh), not this tree's: rebuilding it)
$(shell rm -rf $(VENV))
endif
endif

.PHONY: all demo test lint proto proto-check bench llm node espeak go chromium docker image mutate clean
# The images' base: made here from Debian's packages (no image registry needed); any Debian
# bookworm with Python 3.11 works, e.g. `make image IMAGE_BASE=python:3.11-slim-bookworm`.
IMAGE_BASE ?= hookmesh-base:bookworm

all: test

$(STAMP): pyproject.toml scripts/install-embedder.sh
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	scripts/install-embedder.sh $(BIN)/python
	touch $(STAMP)

# llama.cpp's OpenAI-compatible server and a small model, for the real-server adapter test.
$(LLM_STAMP): $(STAMP) scripts/install-llm.sh
	scripts/install-llm.sh $(BIN)/python
	touch $(LLM_STAMP)

llm: $(LLM_STAMP)

# The Node.js sidecar and client's pinned dependencies.
$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	npm ci --prefix $(NODE_DIR)
	touch $(NODE_STAMP)

node: $(NODE_STAMP)

# Debian's espeak-ng: the TTS engine (service, middleware, `hookmesh say`) and its tests.
espeak:
	@command -v espeak-ng >/dev/null || { SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends espeak-ng; }

# Debian's Go toolchain, grpc-go and protobuf-go (GOPATH mode: no module proxy is needed) and
# protoc's Go plugins: the Go sidecar SDK (clients/go) and its tests.
go:
	@command -v go >/dev/null && command -v protoc-gen-go-grpc >/dev/null && \
		[ -f /usr/share/gocode/src/github.com/golang/protobuf/proto/wrappers.go ] || { \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); $$SUDO apt-get update -qq && \
		$$SUDO apt-get install -y -qq --no-install-recommends golang-go golang-google-grpc-dev \
		golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev protoc-gen-go \
		protoc-gen-go-grpc; }

# Debian's chromium and chromium-driver: the headless browser of the chat page test.
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); $$SUDO apt-get update -qq && \
		$$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver; }

# Debian's Docker engine, debootstrap (the images' base), docker-compose and iproute2 (the
# deploy doc's test runs it in a network namespace of its own), and a running engine with no
# bridge: containers use the host's network (scripts/start-docker.sh).
docker:
	@command -v dockerd >/dev/null && command -v debootstrap >/dev/null && \
		command -v docker-compose >/dev/null && command -v ip >/dev/null || { \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); $$SUDO apt-get update -qq && \
		$$SUDO apt-get install -y -qq --no-install-recommends docker.io debootstrap \
		docker-compose iproute2; }
	@scripts/start-docker.sh

# hookmesh's images (services/*/Dockerfile): hookmesh, hookmesh-envoy, hookmesh-postgres,
# tagged $$HOOKMESH_IMAGE_TAG (default latest); each prints its size and build time.
image: docker
	@$(if $(filter hookmesh-base:%,$(IMAGE_BASE)),scripts/make-base-image.sh $(IMAGE_BASE))
	@for what in hookmesh envoy postgres; do BASE=$(IMAGE_BASE) scripts/build-image.sh $$what \
		|| exit 1; done

# Regenerate src/hookmesh/v1 from protos/ (messages, .pyi stubs and gRPC stubs).
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Iprotos --python_out=$(GEN_DIR) --pyi_out=$(GEN_DIR) \
		--grpc_python_out=$(GEN_DIR) $(PROTOS)
	touch $(GEN_DIR)/hookmesh/v1

# Fail when the committed generated code is not what `make proto` produces.
proto-check: $(STAMP)
	@tmp=$$(mktemp -d) && \
	$(BIN)/python -m grpc_tools.protoc -Iprotos --python_out=$$tmp --pyi_out=$$tmp \
		--grpc_python_out=$$tmp $(PROTOS) && \
	diff -r -x __init__.py -x __pycache__ $$tmp/hookmesh/v1 $(GEN_DIR)/hookmesh/v1 \
		|| { echo "generated code is stale: run 'make proto' and commit"; rm -rf $$tmp; exit 1; }; \
	rm -rf $$tmp; echo "generated code is current"

lint: $(STAMP)
	$(BIN)/buf lint
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

test: $(STAMP) $(LLM_STAMP) $(NODE_STAMP) espeak go chromium image proto-check lint
	$(BIN)/pytest -q

# `make demo DEMO_FLAGS=--serve` keeps the suite up and prints the chat page's URL.
demo: $(STAMP)
	$(BIN)/hookmesh demo $(DEMO_FLAGS)

# Mutation testing (cosmic-ray via scripts/mutate.py, docs/testing.md): every module listed in
# tests/mutation.toml, or only `make mutate MODULES="src/hookmesh/server/_auth.py ..."`.
# Heavy: one mutant at a time, in a copy of the tree under .mutation/ (resumable).
MODULES ?=
mutate: $(STAMP)
	$(BIN)/python scripts/mutate.py $(MODULES)

bench: $(STAMP) espeak
	@for b in bench/*.py; do case $$b in */remote_middlewares.py) continue;; esac; \
		echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .mutation $(NODE_DIR)/node_modules
