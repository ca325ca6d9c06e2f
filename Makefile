# Two commands do everything on a fresh Debian machine:
#   make demo   set up, create a local 2-node Slurm cluster, run a job on it
#   make test   set up, run every test
# Both are idempotent and fast the second time.

VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# Two workers (pytest-xdist): most tests wait on Slurm, not on the CPU; one file's tests stay
# on one worker (conftest.py). TEST_WORKERS=0 runs them in this one process.
TEST_WORKERS ?= 2

.PHONY: setup system demo test bench clean dist

setup: system $(STAMP)

system:
	@bash scripts/install-system-deps.sh

# Reinstalled only when the project's metadata or the labextension's sources change.
$(STAMP): pyproject.toml package.json package-lock.json $(shell find labextension -type f 2>/dev/null)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

demo: setup
	bash examples/demo.sh

test: setup
	$(VENV)/bin/pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

bench: setup
	$(PY) bench/cluster_bringup.py
	$(PY) bench/bringup_defaults.py
	$(PY) bench/delete_speed.py
	$(PY) bench/submit_latency.py
	$(PY) bench/poller_load.py
	$(PY) bench/metrics_tail.py
	$(PY) bench/recipe_overhead.py
	$(PY) bench/feed_latency.py
	$(PY) bench/sidebar_responsiveness.py
	$(PY) bench/ssh_host.py
	$(PY) bench/remote_poll.py
	$(PY) bench/remote_submit.py
	$(PY) bench/recovery.py
	$(PY) bench/vertex_local.py
	$(PY) bench/vertex_clusters.py
	$(PY) bench/serving.py
	$(PY) bench/containers.py
	$(PY) bench/tuning_quality.py

# A wheel and an sdist in dist/ for `pip install` into any JupyterLab 4: both carry the built
# labextension, so installing either needs no Node.js. npm builds it only where it is missing,
# older than labextension/ or a development build (scripts/build_labextension.py); the wheel is
# built from the sdist, which proves the sdist complete. PyPA's `build` runs from a small
# venv of its own, so a wheel needs neither `make setup` nor root; DIST_PY=... picks another
# Python that has `build`.
DIST_VENV := build/dist-venv
DIST_PY ?= $(DIST_VENV)/bin/python

dist: $(DIST_PY)
	rm -rf dist
	$(DIST_PY) -m build --outdir dist .
	@ls dist

$(DIST_VENV)/bin/python:
	python3 -m venv $(DIST_VENV)
	$@ -m pip install -q "build>=1.2"

clean:
	rm -rf $(VENV) node_modules lib jupyter_gtc/labextension
