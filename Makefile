# The README's two commands are `make demo` and `make test`; both build .venv first
# when it is missing or older than pyproject.toml.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp
export PYTHONPATH := $(CURDIR)/platform:$(CURDIR)
export WANDB_MODE ?= offline
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1

.PHONY: setup demo test test-fast bench bench-quick lint format docs k8s-validate serve clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

demo: $(STAMP)
	$(PY) jobs/demo.py --out runs/demo

test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

# The simulator endpoint (OpenAI routes + session API) on the demo's checkpoint, on
# 127.0.0.1:8000 until Ctrl-C; run `make demo` first. Keys: AGENTWORLD_SIM_API_KEYS
# ('team=key,...'), a local development key when unset.
SERVE_MODEL ?= runs/demo/sft/hf
serve: export AGENTWORLD_SIM_API_KEYS ?= demo=sk-agentworld-demo
serve: $(STAMP)
	$(PY) jobs/serve.py --model $(SERVE_MODEL)

# Every bench/bench_*.py, on past a failing one; then bench/results/SUMMARY.md (every ratio
# against its goal). Fails at the end if any benchmark did. bench-quick: small sizes.
define run_benches
	@failed=""; all=$$(date +%s); for b in bench/bench_*.py; do \
	  echo "== $$b $(1)"; t=$$(date +%s); \
	  $(PY) $$b $(1) || failed="$$failed $$b"; \
	  echo "== $$b: $$(( $$(date +%s) - t ))s"; \
	done; \
	$(PY) bench/summary.py || failed="$$failed bench/summary.py"; \
	echo "== all benchmarks: $$(( $$(date +%s) - all ))s"; \
	if [ -n "$$failed" ]; then echo "== failed:$$failed"; exit 1; fi
endef

bench: $(STAMP)
	$(call run_benches,)

bench-quick: $(STAMP)
	$(call run_benches,--quick)

lint: $(STAMP)
	$(VENV)/bin/ruff check platform jobs tests bench serve
	$(VENV)/bin/ruff format --check platform jobs tests bench serve

format: $(STAMP)
	$(VENV)/bin/ruff check --fix platform jobs tests bench serve
	$(VENV)/bin/ruff format platform jobs tests bench serve

# The docs site (mkdocs.yml, docs/) into site/; --strict fails on a broken link, a page
# missing from the nav or a nav entry without its page. CI runs it after lint.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Every KubeRay manifest under k8s/, rendered through each overlay, against the CRDs in
# ../shared/kuberay-crds (override: AGENTWORLD_KUBERAY_CRDS); also run by the tests.
k8s-validate: $(STAMP)
	$(PY) -m agentworld.deploy validate

clean:
	rm -rf runs site bench/results/*.json
