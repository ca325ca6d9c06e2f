"""bench/gpu.py --dry-run: every section of the GPU benchmark on a tiny config on the CPU, so the
script a GPU machine runs once (issue 30) is known to work before that machine's time is spent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = {"machine", "health", "pretrain", "checkpoint", "serving", "sft", "grpo"}


@pytest.mark.timeout(900)  # ~55 s of CPU, 15 processes each importing torch: minutes on a busy machine
def test_every_section_of_the_gpu_bench_runs_on_a_tiny_config(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIP_")}
    env.update(OMP_NUM_THREADS="1")
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--dry-run", "--json", str(out),
                           "--work", str(tmp_path / "work")], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=880)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("DRY RUN"), done.stdout[:300]
    rows = json.loads(out.read_text())["rows"]
    assert {r["section"] for r in rows} == SECTIONS
    failed = [f"{r['section']}: {r['what']}: {r['error']}" for r in rows if r["error"]]
    assert not failed, "\n".join(failed) + "\n" + done.stdout[-3000:]
    what = [r["what"] for r in rows]
    # the pretraining recipe eager and with both of its speed switches; gemma; both SFT kinds
    assert sum("llama" in w for w in what) == 2 and any("compile + activation checkpointing" in w for w in what)
    assert any("gemma" in w for w in what)
    assert {"SFT full, batch 8", "SFT LoRA r16, batch 8"} <= set(what)
    # each training row saw its timed steps; the health checks' run was twice the same digest
    for r in rows:
        if r["section"] in ("pretrain", "sft", "grpo"):
            assert r["values"]["steps"] == 3, r
    assert any(r["ratio"] == "same" for r in rows if r["section"] == "health")
    # no figure is claimed: every row with one says "dry run" instead
    table = done.stdout.split("\n")
    assert all("TFLOP/s" not in line and "tokens/s" not in line for line in table), done.stdout
