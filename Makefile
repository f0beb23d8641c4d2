# rlpatch: every target sets up what it needs in $(VENV) first (a fresh machine needs only python3).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RLPATCH := $(VENV)/bin/rlpatch
STAMP := $(VENV)/.installed
# CPU build of torch for the runtime tests (msprobe's PyTorch API needs torch; no GPU is used).
TORCH_SPEC ?= torch==2.13.0
# The mindstudio-probe release whose behaviour the msprobe differential test encodes.
MSPROBE_SPEC ?= mindstudio-probe==26.2.0
PYTEST_ARGS ?=
# pytest-xdist workers for the test targets: one per core (`auto`); TEST_WORKERS=0 runs in this one process.
TEST_WORKERS ?= auto
# loadfile: a test file's tests run on one worker, so its module-scoped fixtures are built once.
# (xdist's loadgroup would group finer, but its groups are lost under pytest 9: it rewrites item._nodeid.)
XDIST = -n $(TEST_WORKERS) --dist loadfile
# Folders of real launch scripts for `make bench` (e.g. a verl checkout's examples and recipe): each is
# passed to tests/bench_lint.py as --scripts; empty = generated scripts. BENCH_COLD_SCRIPT: the script of
# its cold single-script runs (issue 29.4 measures verl's examples/grpo_trainer/run_qwen3_235b_a22b_megatron.sh);
# empty = the first one linted. BENCH_COLD_VERL_ROOT: a verl tree the cold runs also check against
# (--verl-root; e.g. the checkout the cold script comes from); empty = only the release's config.
BENCH_SCRIPTS ?=
BENCH_COLD_SCRIPT ?=
BENCH_COLD_VERL_ROOT ?=
DEMO_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rlpatch/demo
DEMO_VERL ?= 0.9.1
DEMO_SGLANG ?= 0.5.10.post1
DEMO_VLLM_ASCEND ?= 0.23.0
DEMO_TRAIN = $(DEMO_DIR)/rehearsal/train/fsdp1-ws2/dump
DEMO_INFER = $(DEMO_DIR)/rehearsal/inference/infer

# pyproject.toml's [dependency-groups]: what rlpatch's development needs, never what a user installs.
DEV_GROUPS := test lint bench rehearsal docs
# `make docs` in its own light venv: rlpatch and mkdocs, no torch, no Ray, no msprobe.
DOCS_VENV ?= .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed

.PHONY: install test test-slow test-all test-fast lint bench demo docs docs-pages clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e '.[msprobe,report,ray]' $(foreach group,$(DEV_GROUPS),--group $(group)) \
	    "$(MSPROBE_SPEC)" "$(TORCH_SPEC)"
	touch $(STAMP)

install: $(STAMP)

# The default suite, on every core: unit tests, real upstream wheels (downloaded into a cache outside
# the repo), and the runtime tests that run inserted code with torch and msprobe; all but the `slow` ones.
test: $(STAMP)
	$(PY) -m pytest -q $(XDIST) -m "not slow" $(PYTEST_ARGS)

# The `slow` tests: the real-upstream rehearsals and the twin-model msprobe runs (minutes each).
test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

# The whole suite, as CI (.ci/run) runs it.
test-all: test test-slow

# The quick loop: no downloads, no torch.
test-fast: $(STAMP)
	$(PY) -m pytest -q $(XDIST) -m "not upstream and not runtime" $(PYTEST_ARGS)

# ruff on the sources and tests; mypy ([tool.mypy] in pyproject.toml) on the package as installed: a
# throw-away tree $(TYPE_TREE)/rlpatch of symlinks to patcher/*, with rlpatch/rules -> rules/, so module
# names are the real ones; the report's paths are mapped back to patcher/ and rules/.
TYPE_TREE := build/typecheck
lint: $(STAMP)
	$(PY) -m ruff check patcher rules tests
	rm -rf $(TYPE_TREE) && mkdir -p $(TYPE_TREE)/rlpatch
	ln -s $(CURDIR)/patcher/*.py $(CURDIR)/patcher/py.typed $(TYPE_TREE)/rlpatch/
	for wing in $(CURDIR)/patcher/*/; do ln -s "$${wing%/}" $(TYPE_TREE)/rlpatch/; done
	ln -s $(CURDIR)/rules $(TYPE_TREE)/rlpatch/rules
	cd $(TYPE_TREE) && report=$$($(CURDIR)/$(PY) -m mypy --config-file $(CURDIR)/pyproject.toml \
	    --cache-dir $(CURDIR)/build/mypy-cache -p rlpatch); status=$$?; \
	    printf '%s\n' "$$report" | sed -e 's,^rlpatch/rules/,rules/,' -e 's,^rlpatch/,patcher/,'; exit $$status

# The docs site: the committed rule pages must be what the rules say now (else run `make docs-pages`),
# then mkdocs builds docs/ into build/site with every warning an error.
$(DOCS_STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install -q -e . --group docs
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(DOCS_VENV)/bin/python -m rlpatch.lint.docs_site --check docs
	$(DOCS_VENV)/bin/mkdocs build --strict --quiet

# Regenerate what is written from the rule modules: docs/rules/*.md (after changing a rule's docstring
# or cases) and rules/_lint_modes.py (after adding a lint rule or changing its modes).
docs-pages: $(STAMP)
	$(PY) -m rlpatch.lint.docs_site docs
	$(PY) -m rlpatch.rules

bench: $(STAMP)
	$(PY) tests/bench_patch.py
	$(PY) tests/bench_inference.py
	$(PY) tests/bench_schema.py
	$(PY) tests/bench_lint.py $(foreach dir,$(BENCH_SCRIPTS),--scripts $(dir)) $(if $(BENCH_COLD_SCRIPT),--cold-script $(BENCH_COLD_SCRIPT)) $(if $(BENCH_COLD_VERL_ROOT),--cold-verl-root $(BENCH_COLD_VERL_ROOT))
	$(PY) tests/bench_dumps.py
	$(PY) tests/bench_report.py

demo: $(STAMP)
	rm -rf "$(DEMO_DIR)"
	@echo "== rlpatch doctor (this venv's Python: the real msprobe import, with torch CPU)" && $(RLPATCH) doctor
	$(PY) -c "from rlpatch.upstream.wheelcache import fresh_copy; print('verl $(DEMO_VERL) unpacked at', fresh_copy('verl', '$(DEMO_VERL)', '$(DEMO_DIR)/verl-$(DEMO_VERL)'))"
	@echo "== rlpatch diff (first lines)" && $(RLPATCH) diff --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)" | head -40
	@echo "== rlpatch apply" && $(RLPATCH) apply --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)"
	@echo "== rlpatch verify" && $(RLPATCH) verify --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)"
	@echo "== rlpatch status --format json" && $(RLPATCH) status --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)" --format json
	@echo "== rlpatch revert" && $(RLPATCH) revert --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)"
	@echo "== rlpatch verify after revert (exit 1 expected: nothing applied)" && ! $(RLPATCH) verify --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)"
	$(PY) -c "from rlpatch.upstream.wheelcache import fresh_copy; print('sglang $(DEMO_SGLANG) unpacked at', fresh_copy('sglang', '$(DEMO_SGLANG)', '$(DEMO_DIR)/sglang-$(DEMO_SGLANG)'))"
	@echo "== rlpatch apply --mode inference (SGLang)" && $(RLPATCH) apply --mode inference --sglang-root "$(DEMO_DIR)/sglang-$(DEMO_SGLANG)"
	@echo "== rlpatch revert (SGLang)" && $(RLPATCH) revert --mode inference --sglang-root "$(DEMO_DIR)/sglang-$(DEMO_SGLANG)"
	@echo "== rlpatch detect (a consistency launch script)" && $(RLPATCH) detect fixtures/lint/consistency/fsdp_vllm.sh
	@echo "== rlpatch lint (sample scripts; findings expected, exit 1)" && ! $(RLPATCH) lint --format full fixtures/lint/samples/*.sh
	@echo "== rlpatch lint (the clean consistency scripts)" && $(RLPATCH) lint fixtures/lint/consistency/*.sh
	$(PY) -c "from rlpatch.upstream.wheelcache import fresh_copy; print('vllm-ascend $(DEMO_VLLM_ASCEND) unpacked at', fresh_copy('vllm-ascend', '$(DEMO_VLLM_ASCEND)', '$(DEMO_DIR)/vllm-ascend-$(DEMO_VLLM_ASCEND)'))"
	@echo "== rlpatch gen consistency (a Megatron + vLLM script; the original is not touched)" && $(RLPATCH) gen consistency fixtures/gen/megatron_vllm.sh -o "$(DEMO_DIR)/megatron_vllm.consistency-dump.sh" --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)" --vllm-ascend-root "$(DEMO_DIR)/vllm-ascend-$(DEMO_VLLM_ASCEND)"
	@echo "== rlpatch apply --mode consistency (gen's next step: both trees)" && $(RLPATCH) apply --mode consistency --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)" --vllm-ascend-root "$(DEMO_DIR)/vllm-ascend-$(DEMO_VLLM_ASCEND)"
	@echo "== rlpatch lint of the generated script on the patched trees (no error: RL605/RL607 gone)" && $(RLPATCH) lint --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)" --vllm-ascend-root "$(DEMO_DIR)/vllm-ascend-$(DEMO_VLLM_ASCEND)" "$(DEMO_DIR)/megatron_vllm.consistency-dump.sh"
	@echo "== rlpatch revert --mode consistency" && $(RLPATCH) revert --mode consistency --verl-root "$(DEMO_DIR)/verl-$(DEMO_VERL)" --vllm-ascend-root "$(DEMO_DIR)/vllm-ascend-$(DEMO_VLLM_ASCEND)"
	@echo "== the rehearsal: a consistency run on real upstream code, on CPU (verl 0.9.1 FSDP1 on 2 ranks; vLLM-Ascend 0.23.0's runner, 2 replicas)"
	$(PY) tests/rehearsal/demo.py "$(DEMO_DIR)/rehearsal"
	@echo "== rlpatch dumps check (training side)" && $(RLPATCH) dumps check "$(DEMO_TRAIN)"
	@echo "== rlpatch dumps check (inference side: one {pid} folder per replica)" && $(RLPATCH) dumps check "$(DEMO_INFER)"
	@echo "== rlpatch dumps pair" && $(RLPATCH) dumps pair --train "$(DEMO_TRAIN)" --infer "$(DEMO_INFER)"
	@echo "== rlpatch dumps compare (the real msprobe compare on every pair)" && $(RLPATCH) dumps compare --train "$(DEMO_TRAIN)" --infer "$(DEMO_INFER)" -o "$(DEMO_DIR)/compare" --report "$(DEMO_DIR)/report.html"

clean:
	rm -rf $(VENV) $(DOCS_VENV) build *.egg-info .pytest_cache
