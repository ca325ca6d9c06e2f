"""What ``squeue -h -O <spec>`` prints, for tests where Slurm cannot be made to show a state
on demand, and to write tests/slurm/fixtures/squeue_format: each field's text (as the release's
src/squeue/print.c prints it) followed by the suffix its -O token carries, one job a line.

As a program, a stand-in ``squeue`` on a test's PATH: ``squeue_stub.py ... -O SPEC`` prints the
jobs of the JSON file ``$QUEUE_FILE`` (a list of {field name: text}); a field not given prints
as squeue prints a job's empty one ("(null)" for text, "N/A" for times and array tasks).
"""

from __future__ import annotations

import json
import os
import sys

# What squeue prints for a job that has no value, by -O name (print.c: _print_str of NULL
# under glibc, _print_time of 0, _print_job_array_task_id of NO_VAL, _print_job_batch_host).
EMPTY = {"ArrayTaskId": "N/A", "StartTime": "N/A", "EndTime": "N/A", "BatchHost": "n/a", "NodeList": "",
         "Comment": "(null)", "Reason": "None", "RestartCnt": "0", "exit_code": "0", "StdOut": ""}


def split_spec(spec: str) -> list[tuple[str, str]]:
    """-O's ``name:width suffix,...`` as (name, suffix) pairs (opts.c's _parse_long_token)."""
    pairs = []
    for token in spec.split(","):
        name, _, rest = token.partition(":")
        rest = rest.lstrip(".")
        digits = len(rest) - len(rest.lstrip("0123456789"))
        pairs.append((name, rest[digits:]))
    return pairs


def render(spec: str, jobs: list[dict[str, str]]) -> str:
    return "".join("".join(f"{job.get(name, EMPTY.get(name, '(null)'))}{suffix}" for name, suffix in split_spec(spec))
                   + "\n" for job in jobs)


def main(argv: list[str]) -> int:
    spec = argv[argv.index("-O") + 1]
    with open(os.environ["QUEUE_FILE"]) as f:
        sys.stdout.write(render(spec, json.load(f)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
