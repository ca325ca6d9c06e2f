"""Run the health checks on this node within a time budget, and say what they found.

    python -m jupyter_gtc.health.node [--json] [--budget 20] [--path DIR ...] [--check NAME ...]
                                      [--slurm] [--record DIR]

Each check runs in a thread of its own; one that has not finished when the budget is spent
fails ("did not finish within N s": a hung GPU or filesystem is itself the fault) and is
left behind (a daemon thread: a thread cannot be killed, and the program exits anyway). Exit status 1 when
any check failed, 0 otherwise, so Slurm's HealthCheckProgram or a prolog can act on it.

``--slurm`` acts on the verdict, as LBNL's NHC does for sites: a failed check drains the node
(``SLURMD_NODENAME``) with a reason naming it (``gtc-health: ecc: ...``), and a node that
passes is resumed if, and only if, the reason it is drained for is one of ours: a node an
admin drained by hand stays drained. ``--record DIR`` keeps the last run in
``DIR/<node>.json``, which ``%gtc_health`` and the cluster panel read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time

from .. import _process
from .checks import CHECKS, FAIL, CheckResult, NodeContext

REASON_PREFIX = "gtc-health:"  # a drain reason of ours: the only kind a passing run undoes
REASON_MAX = 200               # characters of evidence kept in the reason scontrol shows


def run_checks(ctx: NodeContext, names: list[str] | None = None, budget: float = 20.0) -> list[CheckResult]:
    """Every check (or those ``names``) at once, each given until ``budget`` seconds from now."""
    names = names or list(CHECKS)
    results: dict[str, CheckResult] = {}
    started = {}

    def run(name: str) -> None:
        started[name] = time.perf_counter()
        try:
            result = CHECKS[name](ctx)
        except Exception as e:  # noqa: BLE001 - a check that breaks is a failed check, with why
            result = CheckResult(name, FAIL, f"the check raised {type(e).__name__}: {e}")
        results[name] = CheckResult(result.check, result.verdict, result.evidence,
                                    round(time.perf_counter() - started[name], 3))

    threads = [threading.Thread(target=run, args=(name,), name=f"check-{name}", daemon=True) for name in names]
    deadline = time.monotonic() + budget
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [results.get(name) or CheckResult(name, FAIL, f"did not finish within {budget:g} s", budget)
            for name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object: node and results")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds for all checks together")
    parser.add_argument("--path", action="append", default=[], help="a filesystem jobs write to (repeatable)")
    parser.add_argument("--check", action="append", choices=sorted(CHECKS), help="only these checks")
    parser.add_argument("--slurm", action="store_true", help="drain this node on a failure; resume it when it "
                                                             "passes, if a failure of ours drained it")
    parser.add_argument("--record", metavar="DIR", help="write the run to DIR/<node>.json")
    args = parser.parse_args(argv)
    ctx = NodeContext(paths=tuple(args.path), fault_dir=os.environ.get("GTC_FAULT_DIR") or None)
    results = run_checks(ctx, args.check, args.budget)
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    run = {"node": node, "time": time.time(), "results": [r.to_json() for r in results]}
    if args.record:
        record(args.record, run)
    if args.slurm:
        act_on(node, results)
    if args.json:
        print(json.dumps(run))  # what was recorded: a caller takes this run, not the newest record
    else:
        for r in results:
            print(f"{node:12} {r.check:12} {r.verdict:5} {r.seconds:6.2f}s  {r.evidence}")
    return 1 if any(r.verdict == FAIL for r in results) else 0


def drain_reason(results: list[CheckResult]) -> str | None:
    """``gtc-health: <check>: <evidence>`` for the first failed check; None when none failed."""
    failed = [r for r in results if r.verdict == FAIL]
    if not failed:
        return None
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{REASON_PREFIX} {failed[0].check}: {failed[0].evidence}"[:REASON_MAX] + more


def act_on(node: str, results: list[CheckResult]) -> None:
    """Drain ``node`` with the failure as reason, or resume it where our failure drained it."""
    reason = drain_reason(results)
    current = _slurm_reason(node)
    if reason is not None:
        if current != reason:
            _scontrol("update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")
    elif current is not None and current.startswith(REASON_PREFIX):
        _scontrol("update", f"NodeName={node}", "State=RESUME")


def record(folder: str, run: dict) -> None:
    """The run as ``folder/<node>.json``, replaced whole (a reader never sees half of one)."""
    os.makedirs(folder, exist_ok=True)
    node = run["node"]
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{node}.")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(run))
    os.replace(tmp, os.path.join(folder, f"{node}.json"))


def _slurm_reason(node: str) -> str | None:
    """Why Slurm has ``node`` drained or down (its Reason=), None when it gives none."""
    out = _scontrol("show", "node", node, "-o")
    reason = out.partition(" Reason=")[2]
    if not reason:
        return None
    # Reason runs to the " [user@time]" scontrol appends, or to the line's end.
    return reason.rsplit(" [", 1)[0].strip() or None


def _scontrol(*argv: str) -> str:
    return _process.run(["scontrol", *argv], timeout=30).stdout


if __name__ == "__main__":
    sys.exit(main())
