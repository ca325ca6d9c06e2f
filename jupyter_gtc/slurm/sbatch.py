"""sbatch's options: its table, a guess at the option a refused one meant, and the GPUs per
node a job's options ask for. Pure.

``SBATCH`` is sbatch 22.05's own table (Slurm's ``src/common/slurm_opt.c``, the options with
an sbatch setter); tests/slurm/test_sbatch.py checks it against the installed sbatch's
``--help``. Options reach sbatch untouched: these are read only to explain a refusal
(``did you mean --gpus-per-node?``) and to refuse early what no node could run.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass

from .srun import OptionTable, read_options

SBATCH = OptionTable(
    values=frozenset("""
    account acctg-freq array batch bb bbf begin chdir cluster cluster-constraint clusters
    comment constraint container context core-spec cores-per-socket cpu-freq cpus-per-gpu
    cpus-per-task deadline delay-boot dependency distribution error exclude export export-file
    extra-node-info gid gpu-bind gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres
    gres-flags hint input job-name kill-on-invalid-dep licenses mail-type mail-user mcs-label mem
    mem-bind mem-per-cpu mem-per-gpu mincpus network nodefile nodelist nodes ntasks ntasks-per-core
    ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres open-mode output
    partition power prefer priority profile qos reservation signal sockets-per-node switches
    tasks-per-node thread-spec threads-per-core time time-min tmp uid wait-all-nodes wckey wrap
    """.split()),
    optional=frozenset("exclusive get-user-env nice no-kill propagate".split()),
    flags=frozenset("""
    contiguous help hold ignore-pbs no-requeue overcommit oversubscribe parsable quiet reboot
    requeue spread-job test-only usage use-min-nodes verbose version wait
    """.split()),
    short_values=frozenset("ABCDFGJLMNSabcdeimnopqtwx"),
    short_optional=frozenset("k"),
    short_names={
        "A": "account", "B": "extra-node-info", "C": "constraint", "D": "chdir", "F": "nodefile", "G": "gpus",
        "H": "hold", "J": "job-name", "L": "licenses", "M": "clusters", "N": "nodes", "O": "overcommit",
        "Q": "quiet", "S": "core-spec", "V": "version", "W": "wait", "a": "array", "b": "begin",
        "c": "cpus-per-task", "d": "dependency", "e": "error", "h": "help", "i": "input", "k": "no-kill",
        "m": "distribution", "n": "ntasks", "o": "output", "p": "partition", "q": "qos", "s": "oversubscribe",
        "t": "time", "v": "verbose", "w": "nodelist", "x": "exclude",
    },
)

# getopt_long's words for a long option it does not know (glibc; sbatch prints them after "sbatch: ").
_UNRECOGNIZED = re.compile(r"unrecognized option '--([^'=]+)(=[^']*)?'")


def read_sbatch_options(words: list[str]) -> list[tuple[str, str | None]]:
    """sbatch's options in ``words`` (``#SBATCH`` lines' and the command line's, in that
    order) as (long name, value), as sbatch reads them: ``-G 2``, ``-G2``, ``--gpus 2``,
    ``--gpus=2`` and ``--gpu=2`` (an abbreviation) are all ``("gpus", "2")``."""
    return read_options(words, SBATCH)[0]


def suggest_option(name: str) -> str | None:
    """The sbatch option that ``name`` (without its dashes) most likely meant, if one is close."""
    close = difflib.get_close_matches(name, sorted(SBATCH.long_options), n=1, cutoff=0.75)
    return close[0] if close else None


def explain_refusal(stderr: str) -> str:
    """sbatch's error text, with ``; did you mean --X?`` after each option it did not know
    that is close to one it does."""
    def add_guess(match: re.Match) -> str:
        guess = suggest_option(match.group(1))
        return match.group(0) + (f"; did you mean --{guess}?" if guess else "")

    return _UNRECOGNIZED.sub(add_guess, stderr)


@dataclass(frozen=True)
class GpuAsk:
    """GPUs that an option asks of every node of the job."""

    option: str
    """The option, as sbatch's table names it (``gpus-per-node``)."""
    value: str
    per_node: int

    @property
    def how(self) -> str:
        """The option as written, with what it asks: ``--gpus-per-node=9 asks for 9``."""
        return f"--{self.option}={self.value} asks for {self.per_node}"


def gpus_per_node_asked(pairs: list[tuple[str, str | None]]) -> list[GpuAsk]:
    """What ``pairs`` (``read_sbatch_options``) ask of each node: ``--gpus-per-node``,
    ``--gres=gpu:N``, and ``--gpus`` (``-G``) spread over a ``--nodes`` (``-N``) that is given
    (without one Slurm chooses how many nodes, so nothing is known per node). The last of an
    option wins, as in sbatch; a value these rules cannot read is left to Slurm."""
    last = dict(pairs)
    asks = []
    if last.get("gpus-per-node") and (count := _gpu_count(last["gpus-per-node"])) is not None:
        asks.append(GpuAsk("gpus-per-node", last["gpus-per-node"], count))
    if last.get("gres") and (count := _gres_gpus(last["gres"])) is not None:
        asks.append(GpuAsk("gres", last["gres"], count))
    if last.get("gpus") and last.get("nodes"):
        total, nodes = _gpu_count(last["gpus"]), _most_nodes(last["nodes"])
        if total is not None and nodes:
            asks.append(_SpreadAsk("gpus", last["gpus"], math.ceil(total / nodes), last["nodes"]))
    return asks


@dataclass(frozen=True)
class _SpreadAsk(GpuAsk):
    """``--gpus`` over ``--nodes``: the job's GPUs, shared out as evenly as Slurm can."""

    nodes: str = ""

    @property
    def how(self) -> str:
        return f"--gpus={self.value} on --nodes={self.nodes} asks for {self.per_node} per node"


def _gpu_count(value: str) -> int | None:
    """``9``, ``h100:9``, ``h100:4,a100:2`` (types summed) -> the count; None where unreadable."""
    total = 0
    for item in value.split(","):
        count = item.rsplit(":", 1)[-1]
        if not count.isdigit():
            return None
        total += int(count)
    return total


def _gres_gpus(value: str) -> int | None:
    """The GPUs in a ``--gres`` list: ``gpu:2``, ``gpu:h100:2``, ``gpu`` (one), beside others
    (``gpu:2,shard:1``). None where it names no GPU or reads otherwise than these."""
    found = None
    for item in value.split(","):
        parts = item.split(":")
        if parts[0] not in ("gpu", "gres/gpu"):
            continue
        if len(parts) > 3 or (len(parts) == 3 and not parts[2].isdigit()):
            return None
        count = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
        found = (found or 0) + count
    return found


def _most_nodes(value: str) -> int | None:
    """``--nodes``' largest count: ``2`` -> 2, ``2-4`` -> 4; None for anything else."""
    most = value.rsplit("-", 1)[-1]
    return int(most) if most.isdigit() and int(most) > 0 else None


# Counts sbatch takes, and the least each may be. sbatch passes an impossible one to slurmctld,
# which refuses it ("Node count specification invalid") only after it has given the job an id
# and written it to the completion file as FAILED: a job nobody submitted shows up in listings.
_AT_LEAST_ONE = ("nodes", "ntasks", "ntasks-per-node", "cpus-per-task", "cpus-per-gpu", "ntasks-per-gpu",
                 "ntasks-per-socket", "ntasks-per-core", "mincpus")
_GPU_COUNTS = ("gpus", "gpus-per-node", "gpus-per-task", "gpus-per-socket")


def count_problem(pairs: list[tuple[str, str | None]]) -> tuple[str, str, str] | None:
    """The first count in ``pairs`` (``read_sbatch_options``) that no job can have, as
    (``--option``, value, what is valid): 0 or less where 1 is the least, a negative GPU count,
    a ``--nodes`` range whose end is below its start. None where each is possible or written in
    a form not read here (``--nodes=1,3`` of a newer Slurm: Slurm's to judge). The last of an
    option wins, as in sbatch."""
    last = dict(pairs)
    for name in _AT_LEAST_ONE:
        value = (last.get(name) or "").strip()
        if name == "nodes" and (m := re.fullmatch(r"(\d+)-(\d+)", value)):
            low, high = int(m.group(1)), int(m.group(2))
            if low < 1 or high < low:
                return "--nodes", value, f"a range MIN-MAX with 1 <= MIN <= MAX, as {min(low, high) or 1}-{max(low, high, 1)}"
        elif re.fullmatch(r"-?\d+", value) and int(value) < 1:
            return f"--{name}", value, "a whole number, 1 or more" + (
                " (nodes for the job; 2-4 lets Slurm choose between 2 and 4)" if name == "nodes" else "")
    for name in _GPU_COUNTS:
        value = last.get(name) or ""
        if any(re.fullmatch(r"-\d+", item.rsplit(":", 1)[-1].strip()) for item in value.split(",")):
            return f"--{name}", value, "a whole number of GPUs, 0 or more, with an optional type (h100:2)"
    return None
