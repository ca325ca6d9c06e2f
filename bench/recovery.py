"""Recovery from a node fault under a training job, and the goodput of a run that keeps meeting them.

1. A crash (the node's slurmd and jobs gone) or a partition (its link down, its processes running
   on) under the llama-pretrain recipe (tiny, one node, a checkpoint every 20 steps): seconds
   from the fault to the node set DOWN, to the job running again on another node and to its
   first new step (it resumes from its newest checkpoint), three ways: Slurm alone with its
   defaults (``SlurmdTimeout=300``, ``cred_expire=120``: a 4-node cluster, both faults at once,
   since each takes minutes of waiting), Slurm alone as local clusters set it (30 and 10), and
   with the cluster's supervisor (2-node clusters, one fault at a time). Local clusters of
   namespace-mode nodes (root), measured in turn in one run; "x Slurm" is the first new step's
   time over Slurm's defaults' (the issue's goal: at most 0.1).
2. The same recipe for ``--minutes`` (10) on the supervised cluster, its node crashed or cut off
   in turn every ``--every`` minutes (2), then its goodput and where the rest of its wall time went
   (metrics/goodput.py).

3. Where the restarted job's seconds went before its first new step, from the job's own log:
   the recipe's ``startup`` line (recipes/startup.py: launch, imports, rendezvous, data, model,
   checkpoint, first step), medians over every supervised restart.
4. ``--setups injob``: a restart inside the job against a requeue, the same program both ways
   (examples/injob_regression.py, data parallel over 2 nodes of a 3-node supervised cluster,
   a snapshot every 5 steps, a disk checkpoint every 20): rank 1's node crashed; seconds from
   the fault to the first new step, and the processes started again. Requeued: every process
   is new and reads the disk checkpoint. In the job (``jupyter_gtc.resume.in_job``, a warm
   spare a node, ``--no-kill``): the survivor keeps its process and a spare takes the lost rank.

    .venv/bin/python bench/recovery.py [--rounds 1] [--minutes 10] [--every 2] [--setups supervised injob]

``--setups supervised --minutes 4`` is the smallest run (a few minutes): Slurm's defaults take
minutes of waiting per fault; without them the "x Slurm" column is left out.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ARGS = ["--steps", "1000000", "--checkpoint-every", "20", "--log-every", "1"]
STEP = re.compile(r"^step (\d+)/", re.M)
STARTUP = re.compile(r"^startup ([\d.]+) s to step \d+: (.*?)(?: \(restart \d+\))?$", re.M)


# name -> (label, supervisor, nodes, local options)
SETUPS = {
    "defaults": ("Slurm alone, its defaults (300 s, 120 s)", False, 4, {"slurmd_timeout": 300, "cred_expire": 120}),
    "slurmonly": ("Slurm alone, local (30 s, 10 s)", False, 2, {}),
    "supervised": ("with the supervisor", True, 2, {}),
    "injob": ("in the job, against a requeue", True, 3, {}),  # measured by injob_rows, not faults
}
INJOB_FLAGS = "--steps 1000000 --snapshot_every 5 --checkpoint_every 20 --step_delay 0.05"
# One program both ways; only how the job meets a fault differs.
INJOB_SCRIPTS = {
    "requeue": ("requeued (a new attempt, new processes)", "--requeue", 1, "", 0),
    "injob": ("in the job (a warm spare a node, --no-kill)", "--requeue --no-kill", 2, "--no-kill --kill-on-bad-exit=0 ",
              2),
}


def injob_script(way: str) -> str:
    _, sbatch, per_node, srun, spares = INJOB_SCRIPTS[way]
    return f"""#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node={per_node} {sbatch}
export OMP_NUM_THREADS=1
python -m jupyter_gtc.lighthouse srun {srun}--distribution=cyclic \\
    python -m jupyter_gtc.examples.injob_regression --spares {spares} {INJOB_FLAGS}
"""


def injob_first_step(text: str, way: str) -> bool:
    """Whether the log shows the first step after the fault: the one after the snapshot the
    job's next generation resumed from (in the job), or after the disk checkpoint the requeued
    attempt resumed from."""
    if way == "injob":
        found = re.search(r"^in-job restart: .* resumes from step (\d+)$", text, re.M)
        after = text[found.end():].partition("generation 1:")[2] if found else ""
    else:
        text = text.partition("(requeued)")[2]
        found = re.search(r"^resuming from \S+/step-\d+ \(step (\d+)\)$", text, re.M)
        after = text[found.end():] if found else ""
    return found is not None and f"step {int(found.group(1)) + 1}/" in after


def injob_rows(api, cluster: str) -> dict[str, tuple[float, int, float]]:
    """Each way once: seconds from the crash of rank 1's node to the first new step, how many
    processes started again, and the slowest new process's own start (its imports and model
    build: what a replacement that is not warm pays before it can join; 0 where none started)."""
    started = re.compile(r"^started: process \d+ pid \d+ on (\S+): imports ([\d.]+) s, model ([\d.]+) s", re.M)
    rank1 = re.compile(r"^generation 0: rank 1 of \d+ is process \d+ pid \d+ on (\S+),", re.M)
    measured = {}
    for way in INJOB_SCRIPTS:
        job = api.submit_job(cluster, injob_script(way))
        wait(lambda: steps_in(log(job)) > 25 and rank1.search(log(job)) is not None, 300)  # past a disk checkpoint
        before = len(started.findall(log(job)))
        node = rank1.search(log(job)).group(1)
        if re.search(rank1.pattern.replace("rank 1", "rank 0"), log(job), re.M).group(1) == node:
            raise RuntimeError(f"ranks 0 and 1 both on {node}: a crash there would take the batch host too")
        began = time.time()
        api.inject_fault(cluster, node, "crash")
        first = wait(lambda: injob_first_step(log(job), way), 300)
        new = started.findall(log(job))[before:]
        measured[way] = (first - began, len(new), max((float(i) + float(m) for _, i, m in new), default=0.0))
        print(f"measured: {way}: first new step after {measured[way][0]:.1f} s, {measured[way][1]} new processes",
              flush=True)
        job.cancel().wait(120)
        heal(api, cluster, [], supervised=True)
    return measured



def spec(name: str, supervisor: bool, nodes: int = 2, local: dict | None = None) -> dict:
    return {"display_name": name,
            "node_pools": [{"id": "cpu", "machine_spec": {"machine_type": "n2-standard-8"},
                            "scaling_spec": {"min_node_count": nodes, "max_node_count": nodes}}],
            "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}]}},
            "local": {"resource_scale": 0.25, "supervisor": supervisor, "network": "namespaces",
                      "supervisor_cooldown": 5, **(local or {})}}


def wait(condition, timeout: float = 600) -> float:
    """The time (``time.time()``) at which ``condition`` first held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"still waiting after {timeout:g} s")
        time.sleep(0.1)
    return time.time()


def log(job) -> str:
    try:
        return job.logs()
    except Exception:  # noqa: BLE001 - not written yet
        return ""


def attempt(job, n: int) -> str:
    """The log of attempt ``n`` (1, 2, ...) of ``job``, '' before it started."""
    text = log(job)
    if n > 1:
        text = text.partition(f"--- jupyter_gtc: attempt {n} (requeued)")[2]
    return text.partition(f"--- jupyter_gtc: attempt {n + 1} (requeued)")[0]


def steps_in(text: str) -> int:
    return len(STEP.findall(text))


def first_new_step(text: str) -> bool:
    """Whether an attempt's log shows its first step: the one after the checkpoint it resumed
    from. (A partitioned node's old copy runs on, cut off, and prints its steps into the same
    log until the node is back: only the step after the checkpoint is surely the new attempt's.)"""
    resumed = re.search(r"resuming from \S+/step-(\d+) ", text)
    return resumed is not None and f"step {int(resumed.group(1)) + 1}/" in text[resumed.end():]


def fault_and_recover(api, cluster: str, job, n: int, fault: str) -> tuple[float, float, float]:
    """Inject ``fault`` on the node of attempt ``n`` of ``job``: seconds to the node DOWN, to the
    job's next attempt running, to that attempt's first step. A partition is cleared then."""
    node = job.nodes
    began = time.time()
    api.inject_fault(cluster, node, fault)
    down = wait(lambda: went_down(api, cluster, node, began) is not None, 900) and went_down(api, cluster, node, began)
    again = wait(lambda: f"attempt {n + 1} (requeued)" in log(job), 900)
    first = wait(lambda: first_new_step(attempt(job, n + 1)), 900)
    try:
        wait(lambda: startup_parts(attempt(job, n + 1)) is not None, 60)
        STARTUPS.append(startup_parts(attempt(job, n + 1)))
    except TimeoutError:
        pass  # a program that prints no startup line (an older recipe): its breakdown is left out
    if fault == "partition":
        api.inject_fault(cluster, node, fault, clear=True)
    return down - began, again - began, first - began


STARTUPS: list[dict[str, float]] = []  # every restarted attempt's startup line, parsed


def startup_parts(text: str) -> dict[str, float] | None:
    """The recipe's ``startup`` line of an attempt's log (the first after its resume), by part."""
    resumed = text.find("resuming from ")
    found = STARTUP.search(text, max(resumed, 0)) if resumed >= 0 else None
    if found is None:
        return None
    parts = {"total": float(found.group(1))}
    for part in found.group(2).split(", "):
        name, _, seconds = part.rpartition(" ")
        parts[name] = float(seconds)
    return parts


def went_down(api, cluster: str, node: str, since: float) -> float | None:
    """When ``node`` was set DOWN after ``since``: the supervisor's "down" event (it restarts the
    node a second later, too soon for a poll to see), else now if Slurm shows it DOWN."""
    for event in api.cluster_events(cluster):
        if event["node"] == node and event["event"] == "down" and event["time"] >= since:
            return event["time"]
    return time.time() if any(x.name == node and x.state == "DOWN" for x in api.get_cluster(cluster).nodes) else None


def heal(api, cluster: str, nodes: list[str], supervised: bool) -> None:
    """Every node up again. The supervisor brings its nodes back by itself; without one, as an
    admin would, each node that is not back is power-cycled (its slurmd stopped, then every
    stopped one started; ReturnToService=2 returns it to service when it registers)."""
    def all_ready() -> bool:
        return all(x.ready for x in api.get_cluster(cluster).nodes)

    if not supervised:
        out = [x.name for x in api.get_cluster(cluster).nodes if x.name in nodes and not x.ready]
        for node in out:
            api.inject_fault(cluster, node, "crash")
        if out:
            api.inject_fault(cluster, out[0], "crash", clear=True)
    wait(all_ready)


def faults(api, cluster: str, kinds: list[str], supervised: bool) -> list[tuple[float, float, float]]:
    """One recipe job per fault of ``kinds``, each on a node of its own; once all are past their
    first checkpoint, every fault at once (each job has a free node to go to); their timings."""
    jobs = [api.run_recipe("llama-pretrain", cluster, nodes=1, args=ARGS, options=["--exclusive"]) for _ in kinds]
    for job in jobs:
        wait(lambda: steps_in(log(job)) > 25)  # past its first checkpoint
    nodes = [job.nodes for job in jobs]
    with ThreadPoolExecutor(len(kinds)) as pool:
        measured = list(pool.map(lambda jf: fault_and_recover(api, cluster, jf[0], 1, jf[1]), zip(jobs, kinds)))
    for job in jobs:
        job.cancel().wait(120)
    heal(api, cluster, nodes, supervised)
    return measured


def goodput_run(api, cluster: str, minutes: float, every: float):
    """The recipe for ``minutes``, a fault on its node every ``every`` minutes, crashes and
    partitions in turn (the supervisor fences a partitioned node, so its old copy of the job does
    not train on into the folders of the new one); its Goodput and the faults' timings."""
    job = api.run_recipe("llama-pretrain", cluster, nodes=1, args=ARGS)
    start = time.monotonic()
    timeline = []
    while start + every * 60 * (len(timeline) + 1) < start + minutes * 60:
        at = start + every * 60 * (len(timeline) + 1)
        wait(lambda: time.monotonic() >= at, every * 60 + 60)
        n = len(timeline) + 1
        wait(lambda: steps_in(attempt(job, n)) > 0)  # it trains: the fault lands on a running attempt
        fault = ("crash", "partition")[(n - 1) % 2]
        timeline.append((fault, *fault_and_recover(api, cluster, job, n, fault)))
        print(f"measured: goodput run {fault}: " + ", ".join(f"{x:.1f}" for x in timeline[-1][1:]), flush=True)
        heal(api, cluster, [], supervised=True)
    wait(lambda: time.monotonic() >= start + minutes * 60, minutes * 60)
    job.cancel().wait(120)
    return job.goodput(), timeline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS),
                        help="which detection setups to measure (default: all)")
    args = parser.parse_args()
    if "supervised" not in args.setups and args.minutes > 0:
        parser.error(f"--setups {' '.join(args.setups)}: must include supervised (the goodput run needs it; "
                     f"--minutes 0 leaves it out)")
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from jupyter_gtc import api

    kinds = ["crash", "partition"]
    rows = {}
    injob = {}
    goodput = None
    try:
        for name, (_, supervised, nodes, local) in SETUPS.items():
            if name not in args.setups:
                continue
            if name == "injob":
                api.create_cluster(spec(name, supervised, nodes, local))
                for _ in range(args.rounds):
                    for way, figures in injob_rows(api, name).items():
                        injob.setdefault(way, []).append(figures)
                api.delete_cluster(name)
                continue
            api.create_cluster(spec(name, supervised, nodes, local))
            for _ in range(args.rounds):
                # Slurm's defaults: both faults at once (minutes each); else one at a time.
                for fault, measured in (zip(kinds, faults(api, name, kinds, supervised)) if nodes > 2 else
                                        [(fault, faults(api, name, [fault], supervised)[0]) for fault in kinds]):
                    rows.setdefault((name, fault), []).append(measured)
                    print(f"measured: {name} {fault}: " + ", ".join(f"{x:.1f}" for x in measured), flush=True)
            if not supervised:
                api.delete_cluster(name)
        if args.minutes > 0:
            goodput, timeline = goodput_run(api, "supervised", args.minutes, args.every)
    finally:
        for c in api.list_clusters(with_status=False):
            api.delete_cluster(c.name)
        shutil.rmtree(home, ignore_errors=True)

    if rows:
        print(f"a node fault under llama-pretrain (tiny, 1 node, checkpoint every 20 steps), {args.rounds} round(s) "
              "each (medians), seconds from the fault")
        print(f"{'fault':<10} {'detection':<42} {'to DOWN':>8} {'job again':>10} {'first step':>11} {'x Slurm':>8}")
    for fault in kinds if rows else []:
        base = statistics.median(r[2] for r in rows["defaults", fault]) if ("defaults", fault) in rows else None
        for name, (label, *_) in SETUPS.items():
            if (name, fault) not in rows:
                continue
            measured = rows[name, fault]
            down, again, first = (statistics.median(r[i] for r in measured) for i in range(3))
            ratio = f"{first / base:>8.2f}" if base else f"{'-':>8}"
            print(f"{fault:<10} {label:<42} {down:>8.1f} {again:>10.1f} {first:>11.1f} {ratio}")
    if injob:
        print()
        print(f"a restart inside the job against a requeue: examples/injob_regression.py on 2 nodes, rank 1's node "
              f"crashed, {args.rounds} round(s) (medians), seconds from the fault")
        print(f"{'way':<46} {'first new step':>15} {'x requeue':>10} {'new processes':>14} {'their start':>12}")
        base = statistics.median(r[0] for r in injob["requeue"])
        for way, (label, *_) in INJOB_SCRIPTS.items():
            first = statistics.median(r[0] for r in injob[way])
            new = statistics.median(r[1] for r in injob[way])
            own = statistics.median(r[2] for r in injob[way])
            print(f"{label:<46} {first:>15.1f} {first / base:>10.2f} {new:>14g} {own:>12.1f}")
        print("  (their start: the slowest new process's imports and model build, from its own line; a")
        print("   replacement that is not warm pays it before the job can train on)")
    if goodput is not None:
        print()
        print(f"goodput of {args.minutes:g} minutes of llama-pretrain, a fault on its node every {args.every:g} minutes "
              "(crash, partition in turn; supervised)")
        for fault, down, again, first in timeline:
            print(f"  {fault:<10} DOWN after {down:5.1f} s, running again after {again:5.1f} s, "
                  f"first new step after {first:5.1f} s")
        print(f"  {goodput.describe()}")
        print(f"  {'wall':<10} {goodput.wall_s:8.1f} s")
        print(f"  {'productive':<10} {goodput.productive_s:8.1f} s  {goodput.goodput:6.1%}")
        for cause, seconds in goodput.badput_s.items():
            print(f"  {cause:<10} {seconds:8.1f} s  {seconds / goodput.wall_s:6.1%}")
    # Also without the goodput run (--minutes 0): the restarts of the fault rows have their lines.
    if STARTUPS:
        print()
        print(f"the restarted job's startup, from its own log (recipes/startup.py), medians of {len(STARTUPS)} "
              "restarts")
        names = list(dict.fromkeys(name for parts in STARTUPS for name in parts))
        for name in names:
            values = [parts[name] for parts in STARTUPS if name in parts]
            print(f"  {name:<12} {statistics.median(values):6.1f} s  (min {min(values):.1f}, max {max(values):.1f})")
    return 0

if __name__ == "__main__":
    sys.exit(main())
