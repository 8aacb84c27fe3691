# Two commands matter: `make demo` and `make test`. Both create the virtualenv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SEEDS ?= 10000
SEED_START ?= 0
SIM_JOBS ?= 2
CONTROLLER_SEEDS ?= 500
# make sim MEMBERSHIP_SEEDS=30000: issue 18's run of the membership scenarios alone
MEMBERSHIP_SEEDS ?= 2000
# make chaos DURATION=300 SEED=42 CONTROLLERS=5 CHAOS_ARGS=--no-audit
DURATION ?= 300
SEED ?=
CONTROLLERS ?= 3
CHAOS_ARGS ?=

.PHONY: demo test sim bench bench-peers lint clean chaos audit-demo

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Style, the layer contracts ([tool.importlinter]), types (mypy --strict, [tool.mypy]) and fresh
# generated code.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy
	$(PY) tools/gen_proto.py --check

# Two test files at a time: a file's tests share its module fixtures (one cluster) and run in
# order on one worker; `pytest` alone still runs everything serially.
test: lint
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=30

demo: $(STAMP)
	$(PY) tools/demo.py

audit-demo: $(STAMP)
	$(PY) -m tests.audit.demo build/audit-demo

# The Raft scenarios (membership ones included), the membership scenarios alone, then the real
# QuorumController on simulated nodes (tests/sim/controller_sim.py).
sim: $(STAMP)
	$(PY) -m kraft.sim --seeds $(SEEDS) --seed $(SEED_START) --jobs $(SIM_JOBS)
	$(PY) -m kraft.sim --membership --seeds $(MEMBERSHIP_SEEDS) --seed $(SEED_START) --jobs $(SIM_JOBS)
	$(PY) -m tests.sim.controller_sim --seeds $(CONTROLLER_SEEDS) --seed $(SEED_START)

chaos: $(STAMP)
	$(PY) -m tests.chaos --duration $(DURATION) --controllers $(CONTROLLERS) \
		$(if $(SEED),--seed $(SEED)) --out build/chaos-report.json $(CHAOS_ARGS)

bench: $(STAMP)
	$(PY) -m bench

# Side by side with etcd, PySyncObj and ZooKeeper; installs them first (apt-get, pip into the
# venv). PEERS_ARGS="--scale 100000,1000000" adds the 1M-partition run.
bench-peers: $(STAMP)
	$(PY) -m bench.peers --install $(PEERS_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
