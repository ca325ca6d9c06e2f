"""Run the health checks on this node within a time budget, and say what they found.

    python -m jupyter_gtc.health.node [--json] [--budget 20] [--path DIR ...] [--check NAME ...]

Each check runs in a thread of its own; one that has not finished when the budget is spent
fails ("did not finish within N s": a hung GPU or filesystem is itself the fault) and is
left behind (a daemon thread: a thread cannot be killed, and the program exits anyway). Exit status 1 when
any check failed, 0 otherwise, so Slurm's HealthCheckProgram or a prolog can act on it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from .checks import CHECKS, FAIL, CheckResult, NodeContext


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
    args = parser.parse_args(argv)
    ctx = NodeContext(paths=tuple(args.path), fault_dir=os.environ.get("GTC_FAULT_DIR") or None)
    results = run_checks(ctx, args.check, args.budget)
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    if args.json:
        print(json.dumps({"node": node, "results": [r.to_json() for r in results]}))
    else:
        for r in results:
            print(f"{node:12} {r.check:12} {r.verdict:5} {r.seconds:6.2f}s  {r.evidence}")
    return 1 if any(r.verdict == FAIL for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
