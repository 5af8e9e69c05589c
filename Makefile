# Quick start: `make demo` runs the ResNet50 demo, `make test` runs the tests. Both set up .venv
# (Python 3.12 + uv.lock) first when needed.
PY := .venv/bin/python
export TT_METAL_MOCK_CLUSTER_DESC_PATH ?= $(CURDIR)/ttmodels/data/wormhole_n150_mock_cluster.yaml

.PHONY: setup demo test bench clean-venv
setup:
	@./scripts/setup

demo: setup
	$(PY) demos/resnet50.py $(ARGS)

test: setup
	$(PY) -m pytest -q $(ARGS)

bench: setup
	$(PY) benchmarks/bench_sim.py $(ARGS)
	$(PY) benchmarks/bench_planning.py

clean-venv:
	rm -rf .venv
