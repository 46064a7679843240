# Every target builds the environment first: a fresh clone needs only `make demo` or `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The pinned torch first, from pip's configured index (the development and CI machines have the CPU
# wheel on local disk; from PyPI, Linux x86_64 gets its default, CUDA build); installing the
# project afterwards finds torch>=2.4 satisfied and pulls nothing more (an open range alone would
# fetch a multi-GB CUDA build). To keep a torch you have: TORCH_PIN= (empty) installs none, and
# VENV_FLAGS=--system-site-packages lets the venv see the one installed for $(PY).
TORCH_PIN ?= torch==2.13.0
VENV_FLAGS ?=

.PHONY: venv demo test lint typecheck unit bench gpu-check gpu-rehearse gpu-wheels clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV_FLAGS) $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(if $(strip $(TORCH_PIN)),$(BIN)/pip install -q $(TORCH_PIN))
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

venv: $(BIN)/.installed

demo: venv
	$(BIN)/torchpace doctor examples/naive_train.py --epochs 1

# Tests run in parallel, one worker per usable core up to 4 (each worker imports torch): on the
# 2-core machine with two busy loops beside it the suite takes 9 minutes instead of over 15.
JOBS ?= $(shell $(PY) -c "import os; print(min(4, len(os.sched_getaffinity(0))))")

unit: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(JOBS)

lint: venv
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: venv
	$(BIN)/mypy

test: unit lint typecheck

# Each technique's speedup on the built-in workloads (see docs/bench.md); pages land in torchpace-out/.
# Then the timed runs the tests leave out (they test the logic on recorded or scripted samples):
# --verify's verdicts against plain back-to-back runs, fast_loader against the best stock loader.
bench: venv
	$(BIN)/torchpace bench --workload vision -o torchpace-out/bench-vision.html
	$(BIN)/torchpace bench --workload text -o torchpace-out/bench-text.html
	$(BIN)/python benchmarks/bench_verify_signs.py
	$(BIN)/python benchmarks/bench_data_loader.py --read-ms 2

# The one-call GPU check (benchmarks/gpu/README.md): on the GPU machine with the wheels carried in
# .whl; rehearsed here CPU-sized first; the wheels downloaded into the checkout the call sends.
gpu-check:
	bash benchmarks/gpu/check.sh --wheels .whl

gpu-rehearse: venv
	bash benchmarks/gpu/check.sh --rehearse

gpu-wheels: venv
	bash benchmarks/gpu/wheels.sh .whl

clean:
	rm -rf $(VENV) build *.egg-info torchpace-out
