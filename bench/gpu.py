"""What the recipes, the health checks and serving do on a real GPU, in one table, each figure
beside a baseline measured in the same run (issue 30). Meant for one call on a machine with one
NVIDIA GPU (an H200 here), well under 8 minutes, so a second try fits in the device time:

    python3 bench/gpu.py [--json FILE]          # on the GPU machine, from the repo's root
    .venv/bin/python bench/gpu.py --dry-run     # every section on a tiny config on the CPU

Sections, each time-boxed, each in processes of its own (a section that fails or runs out of
time prints its error in its row and the others go on):

- machine: GPU, driver, CUDA, torch, clocks; a bf16 8192^3 matmul's TFLOP/s against the
  datasheet peak (spec/machines.GPU_PEAK_BF16_TFLOPS): the ceiling MFU is read against;
- health: ``python -m jupyter_gtc.health.node --json``, twice: each check's verdict, time and
  evidence, and the correctness digest of both runs (the same digest);
- llama-pretrain ``1b`` (``python -m jupyter_gtc.recipes.pretrain``, bf16, as the recipe runs it
  on one GPU: a world of one is not wrapped in FSDP2, see recipes/distributed.parallelize), at
  a global batch of 8 x 2048 tokens: the preset's 64 sequences are meant for its 8-GPU machine,
  8 per GPU. WARMUP steps, then STEPS timed; tokens/s and MFU from the recipe's own per-step
  lines; eager, then ``--compile on``, ``--activation-checkpointing on`` and both, each against
  eager;
- gemma-pretrain ``1b``: the same figures, eager;
- SFT with LoRA and full SFT (``jupyter_gtc.recipes.sft``) of the llama 1B model the bench
  writes first with the recipe's own export: steps/s, tokens/s, peak GPU memory;
- one GRPO step (``jupyter_gtc.recipes.rl --algorithm grpo``);
- checkpoint: the recipe's ``Checkpointer`` (torch.distributed.checkpoint) saving and loading
  the 1B model and its AdamW state, against ``torch.save``/``torch.load`` of the same state;
- serving: ``serving/lm_server.Engine`` (the default engine) at batch 1 and 32: tokens/s, p50
  and p95 latency.

Peak GPU memory is NVML's "used" on GPU 0 while the section's process ran, less what was used
before it started: what the job needs the GPU to have, the allocator's cache included.

The GPU machine has no trl and no datasets (TRL's SFT and GRPO need both), and no internet.
They travel as wheels (about 2 MB): here, in the repo's root,

    echo /.whl/ >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl \\
        trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19

and the device call (``run``, timeout_s 540) names ``.whl`` in ``carry`` and runs

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site;
    PYTHONUNBUFFERED=1 python3 bench/gpu.py --json $OUT/gpu.json 2>&1 | tee $OUT/gpu.log

Without them the SFT and GRPO rows say "skipped: trl or datasets is not installed here" and the
rest runs. ``--budget`` (450 s) bounds the whole run: a section that finds it spent says so in
its row; ``--only SECTION`` reruns one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WARMUP, STEPS = 3, 30           # training steps not timed, then timed
DRY_WARMUP, DRY_STEPS = 1, 3
SERVE_TOKENS = 32               # new tokens per request
# sequences x tokens of one pretraining step: the 1b preset's share of one GPU of its 8-GPU machine
BATCH, DRY_BATCH = (8, 2048), (4, 64)


@dataclass
class Row:
    section: str
    what: str
    figure: str = ""            # the measurement, with its unit
    baseline: str = ""          # what it is read against, measured in the same run (or a datasheet's)
    ratio: str = ""
    note: str = ""
    seconds: float = 0.0        # the section process's wall time
    error: str = ""             # why there is no figure: the section failed, timed out or was skipped
    values: dict = field(default_factory=dict)  # the raw numbers, for --json


class Bench:
    def __init__(self, dry: bool, work: Path, budget: float):
        self.dry, self.work = dry, work
        self.deadline = time.monotonic() + budget  # every process's time box ends by then
        self.budget = budget
        self.tokenizer: Path | None = None  # trained once (model probe), then given to each recipe run
        self.rows: list[Row] = []
        self.facts: dict = {}
        self.memory = GpuMemory(enabled=not dry)
        self.trl_missing = ""  # why TRL's recipes cannot run here, once one found out

    # -- running a section's process --------------------------------------------------------

    def env(self) -> dict[str, str]:
        # not a job's AIP_* folders: the recipes would write there instead of the scratch folder
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIP_")}
        env.update(PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false", TRANSFORMERS_VERBOSITY="error")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        if self.dry:  # the CPU even where a GPU is: a dry run claims nothing and must run anywhere
            env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
        return env

    def child(self, argv: list[str], timeout: float, stop=None) -> Child:
        """Run ``argv`` (a Python module or this script), its output read line by line with the
        time each line came; ``stop(lines)`` True ends it early (SIGTERM to its process group)."""
        child = Child(argv=[sys.executable, *argv])
        timeout = min(timeout, self.deadline - time.monotonic())
        if timeout < 5:
            raise OutOfBudget(f"skipped: the run's budget ({self.budget:g} s) is spent")
        self.memory.start()
        started = time.monotonic()
        proc = subprocess.Popen(child.argv, cwd=self.work, env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
        timer = threading.Timer(timeout, lambda: _end(proc, child, f"timed out after {timeout:g} s"))
        timer.start()
        try:
            for line in proc.stdout:
                child.lines.append((time.monotonic(), line.rstrip("\n")))
                if stop is not None and not child.stopped and stop(child.lines):
                    _end(proc, child, "")
            proc.wait()
        finally:
            timer.cancel()
            child.seconds = time.monotonic() - started
            child.peak_bytes = self.memory.stop()
        child.rc = proc.returncode
        return child

    def section(self, name: str, fn, *args) -> None:
        started = time.monotonic()
        try:
            rows = fn(*args)
        except OutOfBudget as e:
            rows = [Row(name, "(section)", error=str(e))]
        except Exception as e:  # noqa: BLE001 - a section that breaks prints why and the others go on
            rows = [Row(name, "(section)", error=f"{type(e).__name__}: {e}")]
        for row in rows:
            row.seconds = row.seconds or round(time.monotonic() - started, 1)
        self.rows.extend(rows)
        for row in rows:
            print(f"  {row.section}: {row.what}: {row.error or row.figure or 'ok'} ({row.seconds:.0f} s)",
                  file=sys.stderr, flush=True)

    def probe(self, name: str, timeout: float, *extra: str) -> dict:
        """One of this script's own probes (``--probe NAME``) in a process of its own: its result."""
        argv = [str(Path(__file__).resolve()), "--probe", name, "--work", str(self.work), *extra]
        if self.dry:
            argv.append("--dry-run")
        child = self.child(argv, timeout)
        for _, line in reversed(child.lines):
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
                result["_seconds"], result["_peak_bytes"] = round(child.seconds, 1), child.peak_bytes
                return result
        raise RuntimeError(child.why_failed())


class OutOfBudget(Exception):
    """The run's time budget is spent: the sections left say so instead of running."""


@dataclass
class Child:
    argv: list[str]
    lines: list[tuple[float, str]] = field(default_factory=list)
    rc: int | None = None
    seconds: float = 0.0
    peak_bytes: int | None = None
    stopped: bool = False
    timed_out: str = ""

    def why_failed(self) -> str:
        if self.timed_out:
            return self.timed_out
        tail = [line for _, line in self.lines if line.strip()][-1:] or ["no output"]
        return f"exit {self.rc}: {tail[0][-300:]}"

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _end(proc: subprocess.Popen, child: Child, why: str) -> None:
    child.stopped = True
    child.timed_out = child.timed_out or why
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    kill = threading.Timer(10, lambda: _kill(proc))  # one that ignores SIGTERM (a hung NCCL call)
    kill.daemon = True
    kill.start()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class GpuMemory:
    """NVML's used memory of GPU 0, sampled every 0.1 s while a section's process runs."""

    def __init__(self, enabled: bool):
        self.handle = self.nvml = None
        if enabled:
            try:
                import pynvml
                pynvml.nvmlInit()
                self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
            except Exception:  # noqa: BLE001 - no NVML: peak memory says n/a
                pass
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.base = self.peak = 0

    def used(self) -> int:
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used

    def start(self) -> None:
        if self.handle is None:
            return
        self.base = self.peak = self.used()
        self._stop.clear()

        def sample() -> None:
            while not self._stop.wait(0.1):
                self.peak = max(self.peak, self.used())

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()

    def stop(self) -> int | None:
        if self.handle is None or self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        return self.peak - self.base


# -- sections ---------------------------------------------------------------------------------

def machine(b: Bench) -> list[Row]:
    r = b.probe("machine", 90)
    b.facts = r
    peak = r.get("peak_tflops")
    rows = [Row("machine", "GPU, driver, CUDA, torch", figure=r["summary"], note=r.get("clocks", ""),
                values=r)]
    ratio = f"{r['tflops'] / peak:.0%}" if peak else ""
    rows.append(Row("machine", f"matmul {r['matmul']}", figure=f"{r['tflops']:.1f} TFLOP/s",
                    baseline=f"datasheet {peak:g} TFLOP/s" if peak else "no datasheet figure for this device",
                    ratio=ratio, note="mean of 10 after 3 warm-ups", seconds=r["_seconds"], values=r))
    return rows


def health(b: Bench) -> list[Row]:
    runs = []
    for _ in range(2):
        child = b.child(["-m", "jupyter_gtc.health.node", "--json", "--path", str(b.work)], 60)
        found = [line for _, line in child.lines if line.startswith("{")]
        if not found:
            raise RuntimeError(child.why_failed())
        runs.append((json.loads(found[-1]), child.seconds))
    (first, seconds), (second, _) = runs
    rows = [Row("health", f"{r['check']}: {r['verdict']}", figure=f"{r['seconds']:.2f} s", note=r["evidence"][:160],
                seconds=round(seconds, 1), values=r) for r in first["results"]]
    digests = [next(r["evidence"] for r in run["results"] if r["check"] == "correctness") for run, _ in runs]
    rows.append(Row("health", "correctness, run 1 vs run 2", figure=digests[0], baseline=digests[1],
                    ratio="same" if digests[0] == digests[1] else "DIFFERENT",
                    error="" if digests[0] == digests[1] else "two runs gave different digests"))
    return rows


def make_model(b: Bench) -> Path:
    """The llama 1B model folder SFT, GRPO, checkpoint and serving start from: random weights,
    the tokenizer trained on the corpus, exported as the pretraining recipe exports (fp32)."""
    r = b.probe("model", 180)
    return Path(r["folder"])


STEP_LINE = re.compile(r"^step (\d+)/\d+ .*tokens/s (\d+)(?: mfu ([\d.]+)%)?")


def pretrain(b: Bench, label: str, flags: list[str], timeout: float) -> Row:
    """The pretraining recipe run as a user runs it, stopped once the timed steps are printed
    (no final checkpoint and export: they are not what a step costs)."""
    warm, timed = (DRY_WARMUP, DRY_STEPS) if b.dry else (WARMUP, STEPS)
    last = warm + timed
    out = b.work / f"pretrain-{re.sub(r'[^a-z0-9]+', '-', label.lower())}"
    argv = ["-m", "jupyter_gtc.recipes.pretrain", *flags, "--steps", "100000", "--checkpoint-every", "100000",
            "--log-every", "1", "--output-dir", str(out)]
    sequences, tokens = DRY_BATCH if b.dry else BATCH
    argv += ["--size", "tiny" if b.dry else "1b", "--global-batch", str(sequences), "--seq-len", str(tokens)]

    def done(lines) -> bool:
        m = STEP_LINE.match(lines[-1][1])
        return bool(m) and int(m.group(1)) >= last

    if b.tokenizer is not None:  # the bench's model's tokenizer: each run trained the same one (seconds each)
        argv += ["--tokenizer", str(b.tokenizer)]
    try:
        child = b.child(argv, timeout, stop=done)
    except OutOfBudget as e:
        return Row("pretrain", label, error=str(e))
    steps_seen = [(int(m.group(1)), float(m.group(2)), float(m.group(3)) if m.group(3) else None)
                  for _, line in child.lines if (m := STEP_LINE.match(line))]
    measured = [s for s in steps_seen if warm < s[0] <= last]
    row = Row("pretrain", label, seconds=round(child.seconds, 1))
    if not measured:
        row.error = child.why_failed() if not child.stopped or child.timed_out else "no step printed"
        oom = [line for _, line in child.lines if "OutOfMemory" in line or "out of memory" in line]
        if oom:
            row.error = "CUDA out of memory: " + oom[-1][-200:]
        return row
    # the recipe's per-step tokens/s (perf_counter around each step): over the timed steps,
    # total tokens over total time, its harmonic mean; MFU is proportional to it.
    tps = len(measured) / sum(1 / s[1] for s in measured)
    mfu = statistics.fmean(s[2] / s[1] for s in measured) * tps if all(s[2] is not None for s in measured) else None
    step_s = sequences * tokens / tps
    row.figure = f"{step_s:.3f} s/step, {tps:,.0f} tokens/s" + (f", MFU {mfu:.1f}%" if mfu is not None else "")
    row.note = (f"{len(measured)} steps after {warm}" + (f"; peak GPU memory {_gib(child.peak_bytes)}"
                                                          if child.peak_bytes is not None else ""))
    if len(measured) < timed:
        row.note += f" (only {len(measured)} of {timed} in the time box)"
    row.values = {"tokens_per_s": tps, "step_s": step_s, "mfu_percent": mfu, "steps": len(measured),
                  "peak_bytes": child.peak_bytes}
    return row


def llama(b: Bench) -> list[Row]:
    name = "llama tiny" if b.dry else "llama 1b"
    eager = pretrain(b, f"{name}, {_batch(b)}, eager", ["--model", "llama"], 150)
    rows = [eager]
    variants = [("+ compile", ["--compile", "on"]), ("+ activation checkpointing", ["--activation-checkpointing", "on"]),
                ("+ compile + activation checkpointing", ["--compile", "on", "--activation-checkpointing", "on"])]
    if b.dry:  # compiling costs ~30 s per process on a CPU: one variant covers both switches' code
        variants = variants[2:]
    for label, flags in variants:
        rows.append(_against(pretrain(b, f"{name} {label}", ["--model", "llama", *flags], 180), eager))
    ceiling = b.facts.get("tflops")
    for row in rows:
        mfu = row.values.get("mfu_percent")
        if mfu is not None and ceiling and b.facts.get("peak_tflops") and not row.baseline:
            of_ceiling = mfu / 100 * b.facts["peak_tflops"] / ceiling
            row.baseline, row.ratio = f"matmul ceiling {ceiling:.0f} TFLOP/s", f"{of_ceiling:.0%} of it"
    return rows


def _batch(b: Bench) -> str:
    sequences, tokens = DRY_BATCH if b.dry else BATCH
    return f"global batch {sequences} x {tokens} tokens"


def _against(row: Row, base: Row) -> Row:
    if row.values.get("tokens_per_s") and base.values.get("tokens_per_s"):
        row.baseline = f"eager {base.values['tokens_per_s']:,.0f} tokens/s"
        row.ratio = f"{row.values['tokens_per_s'] / base.values['tokens_per_s']:.2f}x"
    return row


def gemma(b: Bench) -> list[Row]:
    row = pretrain(b, f"gemma {'tiny' if b.dry else '1b'}, {_batch(b)}, eager", ["--model", "gemma"], 150)
    ceiling, peak = b.facts.get("tflops"), b.facts.get("peak_tflops")
    if row.values.get("mfu_percent") is not None and ceiling and peak:
        row.baseline = f"matmul ceiling {ceiling:.0f} TFLOP/s"
        row.ratio = f"{row.values['mfu_percent'] / 100 * peak / ceiling:.0%} of it"
    return [row]


TRL_LOG = re.compile(r"\{'loss': .*\}|\{\"loss\": .*\}")


def _trl_logs(lines: list[tuple[float, str]]) -> list[tuple[float, dict]]:
    """The per-step log dicts TRL's trainer prints (logging_steps=1), with when each came."""
    import ast
    found = []
    for when, line in lines:
        m = TRL_LOG.search(line)
        if m:
            try:
                found.append((when, ast.literal_eval(m.group(0))))
            except (ValueError, SyntaxError):
                continue
    return found


NO_TRL = re.compile(r"No module named '(trl|datasets)[^']*'")


def _no_trl(b: Bench, child: Child) -> str:
    """Why a TRL recipe could not start here ("" if it is not that), remembered for the rest."""
    if NO_TRL.search(child.text()):
        b.trl_missing = ("skipped: trl or datasets is not installed here; carry them as wheels (bench/gpu.py's "
                         "docstring): " + NO_TRL.search(child.text()).group(0))
    return b.trl_missing or ""


def sft(b: Bench, model: Path) -> list[Row]:
    kinds = (("SFT full, batch 8", []), ("SFT LoRA r16, batch 8", ["--lora"]))
    rows = []
    for label, flags in kinds:
        rows.append(trl_run(b, "sft", label, ["-m", "jupyter_gtc.recipes.sft", "--init-from", str(model), *flags,
                                              "--batch-size", "8"], 180))
    full, lora = rows
    if lora.values.get("steps_per_s") and full.values.get("steps_per_s"):
        lora.baseline = f"full {full.values['steps_per_s']:.2f} steps/s"
        lora.ratio = f"{lora.values['steps_per_s'] / full.values['steps_per_s']:.2f}x"
    return rows


def trl_run(b: Bench, section: str, label: str, argv: list[str], timeout: float, timed: int | None = None) -> Row:
    """A TRL recipe stopped once its timed steps are logged (no final checkpoint or save)."""
    if b.trl_missing:
        return Row(section, label, error=b.trl_missing)
    warm, timed = (DRY_WARMUP, DRY_STEPS) if b.dry else (WARMUP, timed or STEPS)
    out = b.work / f"{section}-{re.sub(r'[^a-z0-9]+', '-', label.lower())}"
    argv = [*argv, "--max-steps", "100000", "--save-steps", "100000", "--output-dir", str(out)]
    if b.dry:  # fewer generated conversations to tokenize: a few steps need only these
        argv += ["--examples", "64"]
    try:
        child = b.child(argv, timeout, stop=lambda lines: bool(TRL_LOG.search(lines[-1][1]))
                        and len(_trl_logs(lines)) >= warm + timed)
    except OutOfBudget as e:
        return Row(section, label, error=str(e))
    logs = _trl_logs(child.lines)
    row = Row(section, label, seconds=round(child.seconds, 1))
    if len(logs) <= warm:
        row.error = _no_trl(b, child) or child.why_failed()
        return row
    (t0, first), (t1, end) = logs[warm - 1], logs[-1]
    steps = len(logs) - warm
    steps_per_s = steps / (t1 - t0)
    row.values = {"steps_per_s": steps_per_s, "step_s": 1 / steps_per_s, "steps": steps,
                  "peak_bytes": child.peak_bytes}
    row.figure = f"{1 / steps_per_s:.3f} s/step, {steps_per_s:.2f} steps/s"
    if "num_tokens" in end and "num_tokens" in first:
        # transformers prints each value with 4 significant digits ('1.235e+05'): 0.1% at most here
        row.values["tokens_per_s"] = (float(end["num_tokens"]) - float(first["num_tokens"])) / (t1 - t0)
        row.figure += f", {row.values['tokens_per_s']:,.0f} tokens/s"
    row.note = f"{steps} steps after {warm}" + (f"; peak GPU memory {_gib(child.peak_bytes)}"
                                                 if child.peak_bytes is not None else "")
    return row


def grpo(b: Bench, model: Path) -> list[Row]:
    # the recipe's defaults on the tiny model; on the 1B model, answers of 32 tokens
    flags = [] if b.dry else ["--num-generations", "8", "--batch-size", "32", "--max-completion-length", "32"]
    row = trl_run(b, "grpo", "GRPO step" + ("" if b.dry else ", 32 completions of 32 tokens"),
                  ["-m", "jupyter_gtc.recipes.rl", "--algorithm", "grpo", "--init-from", str(model), *flags], 180,
                  timed=2)
    if row.values.get("step_s"):
        row.figure = f"{row.values['step_s']:.2f} s per step"
    return [row]


def checkpoint(b: Bench, model: Path) -> list[Row]:
    r = b.probe("checkpoint", 150, "--model", str(model))
    gb = r["bytes"] / 1e9
    rows = []
    for verb in ("save", "load"):
        dcp_s, plain_s = r[f"dcp_{verb}_s"], r[f"plain_{verb}_s"]
        rows.append(Row("checkpoint", f"DCP {verb}, model + AdamW ({gb:.1f} GB)",
                        figure=f"{dcp_s:.2f} s, {gb / dcp_s:.2f} GB/s",
                        baseline=f"torch.{verb} {plain_s:.2f} s, {gb / plain_s:.2f} GB/s",
                        ratio=f"{plain_s / dcp_s:.2f}x its speed", note=r["note"], seconds=r["_seconds"], values=r))
    return rows


def serving(b: Bench, model: Path) -> list[Row]:
    r = b.probe("serving", 150, "--model", str(model))
    rows = []
    for batch in (1, 32):
        m = r[str(batch)]
        rows.append(Row("serving", f"lm_server engine, batch {batch}, {m['requests']} requests of {r['tokens']} tokens",
                        figure=f"{m['tokens_per_s']:,.0f} tokens/s, p50 {m['p50'] * 1000:.0f} ms, "
                               f"p95 {m['p95'] * 1000:.0f} ms",
                        note=f"peak GPU memory {_gib(r['_peak_bytes'])}" if r["_peak_bytes"] is not None else "",
                        seconds=r["_seconds"], values=m))
    one, many = r["1"], r["32"]
    rows[1].baseline = f"batch 1 {one['tokens_per_s']:,.0f} tokens/s"
    rows[1].ratio = f"{many['tokens_per_s'] / one['tokens_per_s']:.1f}x tokens/s"
    return rows


# -- probes: run in a process of their own ------------------------------------------------------

def probe_machine(dry: bool, work: Path, args) -> dict:
    import platform

    import torch

    from jupyter_gtc.spec.machines import gpu_peak_bf16_tflops
    out: dict = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        out.update(gpu=props.name, sms=props.multi_processor_count, memory_gib=round(props.total_memory / 2**30, 1),
                   capability=f"{props.major}.{props.minor}", peak_tflops=gpu_peak_bf16_tflops(props.name))
        try:
            import pynvml
            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            out["driver"] = pynvml.nvmlSystemGetDriverVersion()
            clocks = {kind: (pynvml.nvmlDeviceGetClockInfo(h, c), pynvml.nvmlDeviceGetMaxClockInfo(h, c))
                      for kind, c in (("SM", pynvml.NVML_CLOCK_SM), ("memory", pynvml.NVML_CLOCK_MEM))}
            out["clocks"] = ", ".join(f"{k} {now}/{top} MHz (now/max)" for k, (now, top) in clocks.items())
        except Exception as e:  # noqa: BLE001
            out["clocks"] = f"NVML: {e}"
        device, dtype, n = torch.device("cuda"), torch.bfloat16, 8192
    else:
        out.update(gpu=f"none: CPU {platform.processor() or platform.machine()}", peak_tflops=None)
        device, dtype, n = torch.device("cpu"), torch.float32, 256
    out["summary"] = (f"{out['gpu']}" + (f" ({out['sms']} SMs, {out['memory_gib']} GiB, sm_{out['capability']})"
                                          if "sms" in out else "")
                      + f", driver {out.get('driver', '-')}, CUDA {out['cuda']}, torch {out['torch']}")
    a = torch.randn(n, n, device=device, dtype=dtype)
    c = torch.randn(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(3):
        a @ c
    sync()
    start = time.perf_counter()
    for _ in range(10):
        a @ c
    sync()
    seconds = (time.perf_counter() - start) / 10
    out.update(matmul=f"{str(dtype).removeprefix('torch.')} {n}^3", tflops=2 * n**3 / seconds / 1e12)
    if "clocks" in out and device.type == "cuda":  # the SM clock under load, read just after
        import pynvml
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        out["clocks"] += f"; SM {pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)} MHz after the matmuls"
    return out


def probe_model(dry: bool, work: Path, args) -> dict:
    """The pretraining recipe's model and tokenizer, exported by its own ``export_model``."""
    import torch

    from jupyter_gtc.recipes import data, models
    from jupyter_gtc.recipes.checkpoint import export_model
    from jupyter_gtc.recipes.config import SIZE_PRESETS
    from jupyter_gtc.recipes.distributed import World

    size = "tiny" if dry else "1b"
    vocab = 512 if dry else SIZE_PRESETS["1b"]["vocab_size"]
    tokenizer = data.train_tokenizer(data.load_texts("pydoc-topics"), vocab)
    config = models.model_config("llama", size, len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                                 eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = models.build_model(config)
    folder = work / "model-llama"
    world = World(rank=0, local_rank=0, size=1, device=torch.device("cpu"))
    export_model(model, tokenizer, folder, world, {"recipe": "pretrain", "model": "llama", "size": size, "step": 0})
    return {"folder": str(folder), "parameters": sum(p.numel() for p in model.parameters())}


def probe_checkpoint(dry: bool, work: Path, args) -> dict:
    """The recipe's Checkpointer (DCP) against torch.save/torch.load of the same state: the
    model in fp32 on the GPU, as training holds it, and AdamW's state after one step. Both
    written to the same disk and flushed to it (DCP fsyncs its files; torch.save's file is
    fsynced too); both read back from the page cache just after."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from jupyter_gtc.recipes.checkpoint import Checkpointer
    from jupyter_gtc.recipes.distributed import World

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device.type == "cuda")
    ids = torch.randint(0, model.config.vocab_size, (1, 64), device=device)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    world = World(rank=0, local_rank=0, size=1, device=device)
    folder = work / "checkpoint-bench"
    shutil.rmtree(folder, ignore_errors=True)
    checkpoints = Checkpointer(folder, world, keep=1)
    sync()
    start = time.perf_counter()
    path = checkpoints.save(1, model, optimizer, {})
    dcp_save = time.perf_counter() - start
    start = time.perf_counter()
    checkpoints.load(path, model, optimizer)
    sync()
    dcp_load = time.perf_counter() - start
    state = {"model": model.state_dict(), "optim": optimizer.state_dict()}
    size = sum(t.numel() * t.element_size() for t in _tensors(state))
    plain = folder / "plain.pt"
    start = time.perf_counter()
    with open(plain, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    plain_save = time.perf_counter() - start
    del state
    start = time.perf_counter()
    loaded = torch.load(plain, map_location=device, weights_only=True)
    model.load_state_dict(loaded["model"])
    optimizer.load_state_dict(loaded["optim"])
    sync()
    plain_load = time.perf_counter() - start
    shutil.rmtree(folder, ignore_errors=True)
    return {"bytes": size, "dcp_save_s": dcp_save, "dcp_load_s": dcp_load, "plain_save_s": plain_save,
            "plain_load_s": plain_load, "note": f"to {folder.parent}, fsynced; loads from the page cache"}


def _tensors(tree):
    import torch
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, dict):
        for v in tree.values():
            yield from _tensors(v)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _tensors(v)


def probe_serving(dry: bool, work: Path, args) -> dict:
    """The serving engine (its batching loop, as a replica runs it) at batch 1 (one request at a
    time) and 32 (32 clients at once, so each generate call takes them all)."""
    from concurrent.futures import ThreadPoolExecutor

    from jupyter_gtc.serving.contract import Instance
    from jupyter_gtc.serving.lm_server import Engine

    engine = Engine(args.model)
    engine.start()
    while not engine.ready.wait(0.1):
        if engine.failed:
            raise RuntimeError(engine.failed)
    prompts = ["The try statement", "A function definition", "Exceptions are", "The import system"]
    tokens = 4 if dry else SERVE_TOKENS

    def one(i: int) -> tuple[float, int]:
        start = time.perf_counter()
        found = engine.submit([Instance(prompt=prompts[i % len(prompts)], max_tokens=tokens)]).result()
        return time.perf_counter() - start, found[0]["tokens"]

    out: dict = {"tokens": tokens}
    for batch, requests in ((1, 2 if dry else 8), (32, 32 if dry else 64)):
        with ThreadPoolExecutor(batch) as pool:
            list(pool.map(one, range(batch)))  # warm: the first generate calls pay for setup
            start = time.perf_counter()
            done = list(pool.map(one, range(requests)))
            wall = time.perf_counter() - start
        latencies = sorted(d[0] for d in done)
        out[str(batch)] = {"requests": requests, "tokens_per_s": sum(d[1] for d in done) / wall,
                           "p50": statistics.median(latencies),
                           "p95": latencies[round(0.95 * (len(latencies) - 1))]}
    return out


PROBES = {"machine": probe_machine, "model": probe_model, "checkpoint": probe_checkpoint, "serving": probe_serving}


# -- the table ------------------------------------------------------------------------------------

def _gib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**30:.1f} GiB"


def table(rows: list[Row], dry: bool, total: float) -> str:
    head = ("DRY RUN: every section on a tiny config on the CPU; no figure here is a measurement"
            if dry else "bench/gpu.py: figures measured in this run")
    cols = ("section", "what", "figure", "baseline (same run)", "ratio", "s", "note / error")
    lines = [head, ""]
    data = []
    for r in rows:
        figure = "dry run" if dry and not r.error else r.figure
        baseline, ratio = ("dry run", "") if dry and r.baseline else (r.baseline, r.ratio)
        note = ("ERROR: " + r.error) if r.error and not r.error.startswith("skipped") else (r.error or r.note)
        if dry and not r.error and r.section in ("machine", "health"):
            note = ""
        data.append((r.section, r.what, figure, baseline, ratio, f"{r.seconds:.0f}", note))
    widths = [max(len(c), *(len(d[i]) for d in data)) if data else len(c) for i, c in enumerate(cols)]
    widths[1] = min(widths[1], 60)  # "what"; the figures are never cut
    fmt = " | ".join(f"{{:{w}.{w}}}" for w in widths[:-1]) + " | {}"
    lines.append(fmt.format(*cols))
    lines.append("-+-".join("-" * w for w in widths[:-1]) + "-+-" + "-" * 20)
    lines += [fmt.format(*d) for d in data]
    lines.append("")
    lines.append(f"{len(rows)} rows, {sum(1 for r in rows if r.error and not r.error.startswith('skipped'))} errors, "
                 f"{sum(1 for r in rows if r.error.startswith('skipped'))} skipped, {total:.0f} s in all")
    return "\n".join(lines)


SECTIONS = ("machine", "health", "pretrain-llama", "pretrain-gemma", "sft", "grpo", "checkpoint", "serving")


def run_all(dry: bool, work: Path, only: set[str], budget: float) -> tuple[list[Row], float]:
    """The sections in order of what the issue needs most; each process's time box is cut to
    what is left of ``budget``, and what finds it spent says so in its row."""
    b = Bench(dry, work, budget)
    started = time.monotonic()
    wanted = lambda name: not only or name in only  # noqa: E731
    for name, fn in (("machine", machine), ("health", health)):
        if wanted(name):
            b.section(name, fn, b)
    model, no_model = None, "no model: its export failed (see the model row)"
    if not only or only - {"machine", "health"}:
        try:  # its tokenizer serves the pretraining runs too
            model = make_model(b)
            b.tokenizer = model
        except Exception as e:  # noqa: BLE001
            b.rows.append(Row("model", "llama 1B model for SFT, GRPO, checkpoint, serving", error=str(e)))
            if isinstance(e, OutOfBudget):
                no_model = str(e)
    for name, fn in (("pretrain-llama", llama), ("pretrain-gemma", gemma)):
        if wanted(name):
            b.section("pretrain", fn, b)
    for name, fn in (("checkpoint", checkpoint), ("serving", serving), ("sft", sft), ("grpo", grpo)):
        if wanted(name):
            if model is None:
                b.rows.append(Row(name, "(section)", error=no_model))
            else:
                b.section(name, fn, b, model)
    return b.rows, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="every section on a tiny config on the CPU")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON here")
    parser.add_argument("--only", action="append", choices=SECTIONS, help="run only these sections (repeatable)")
    parser.add_argument("--budget", type=float, help="seconds for the whole run (default 450: a second try "
                                                     "fits in the device time; a dry run's 1500, for a busy CPU)")
    parser.add_argument("--work", help="the scratch folder (default: a new one under the temp folder, removed)")
    parser.add_argument("--probe", choices=sorted(PROBES), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        result = PROBES[args.probe](args.dry_run, Path(args.work), args)
        print("RESULT " + json.dumps(result), flush=True)
        return
    import shutil
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gtc-bench-gpu-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        budget = args.budget or (1500.0 if args.dry_run else 450.0)
        rows, total = run_all(args.dry_run, work, set(args.only or ()), budget)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(table(rows, args.dry_run, total), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"dry_run": args.dry_run, "seconds": total,
                                               "rows": [asdict(r) for r in rows]}, indent=1, default=str))


if __name__ == "__main__":
    main()
