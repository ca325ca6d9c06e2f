"""srun's and sbatch's command lines read as Slurm reads them: the options (with their
values) up to the program or script, then the program and its arguments. Pure.

Both parse with ``getopt_long`` and stop at the first word that is not an option, so
``srun -N 1 --gpus 2 python train.py`` runs ``python train.py``: ``1`` and ``2`` are values.
An ``OptionTable`` is one command's options; ``SRUN`` is srun's (Slurm's
``src/common/slurm_opt.c``: the options srun accepts, in 22.05 and since; ``--uid``/``--gid``
from before), ``slurm/sbatch.py`` holds sbatch's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OptionTable:
    """A command's options as its getopt_long reads them."""

    values: frozenset[str]
    """Long options that take a value: ``--nodes 2`` or ``--nodes=2``."""
    optional: frozenset[str]
    """Long options whose value is optional, so only ever written ``--exclusive=user``: a word
    after them is the next option or the program."""
    flags: frozenset[str]
    """Long options that take none."""
    short_values: frozenset[str]
    """Short options that take a value (``-N 2``, ``-N2``)."""
    short_optional: frozenset[str]
    """Short options whose value is optional (only ever attached: ``-I60``); other letters are
    flags (``-l``, and bundled: ``-lu``)."""
    short_names: Mapping[str, str] = field(default_factory=dict)
    """Each short option's long name (``N``: ``nodes``)."""

    @property
    def long_options(self) -> frozenset[str]:
        return self.values | self.optional | self.flags

    def long_name(self, name: str) -> str:
        """The option that ``name`` abbreviates, as getopt_long allows (``--ntasks-per-n``),
        when exactly one option starts with it; else ``name``."""
        known = self.long_options
        if name in known:
            return name
        candidates = [option for option in known if option.startswith(name)]
        return candidates[0] if len(candidates) == 1 else name


SRUN = OptionTable(
    values=frozenset("""
    accel-bind account acctg-freq autocomplete bb bbf bcast-exclude begin chdir cluster
    cluster-constraint clusters comment constraint container container-id context core-spec
    cores-per-socket cpu-bind cpu-freq cpu_bind cpus-per-gpu cpus-per-task deadline delay-boot
    dependency distribution epilog error exclude export extra extra-node-info gid gpu-bind gpu-freq
    gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags het-group hint ignore-signals
    input job-name jobid licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu
    mem-update mincpus mpi msg-timeout network nodefile nodelist nodes ntasks ntasks-per-core
    ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres open-mode output pack-group
    partition prefer priority profile prolog qos relative reservation resources runtime segment
    signal slurmd-debug sockets-per-node switches task-epilog task-prolog tasks-per-node thread-spec
    threads threads-per-core time time-min tmp treewidth tres-bind tres-per-task uid wait wckey
    """.split()),
    optional=frozenset("""
    bcast compress exclusive external-launcher immediate kill-on-bad-exit nice no-kill oom-kill-step
    overlap propagate pty resv-ports send-libs
    """.split()),
    flags=frozenset("""
    async consolidate-segments contiguous debugger-test disable-status exact help hold interactive label
    multi-prog no-allocate overcommit oversubscribe parsable preserve-env quiet quit-on-interrupt reboot
    spread-job spread-segments stepmgr test-only unbuffered usage use-min-nodes verbose version
    wait-for-children whole
    """.split()),
    short_values=frozenset("ABCDFGJLMNSTWbcdeimnopqrtwx"),
    short_optional=frozenset("IKk"),
    short_names={
        "A": "account", "B": "extra-node-info", "C": "constraint", "D": "chdir", "E": "preserve-env",
        "F": "nodefile", "G": "gpus", "H": "hold", "I": "immediate", "J": "job-name", "K": "kill-on-bad-exit",
        "L": "licenses", "M": "clusters", "N": "nodes", "O": "overcommit", "Q": "quiet", "S": "core-spec",
        "T": "threads", "V": "version", "W": "wait", "X": "disable-status", "Z": "no-allocate", "b": "begin",
        "c": "cpus-per-task", "d": "dependency", "e": "error", "h": "help", "i": "input", "k": "no-kill",
        "l": "label", "m": "distribution", "n": "ntasks", "o": "output", "p": "partition", "q": "qos",
        "r": "relative", "s": "oversubscribe", "t": "time", "u": "unbuffered", "v": "verbose", "w": "nodelist",
        "x": "exclude",
    },
)
# The tables by their old names, for callers that read them.
VALUE_OPTIONS, OPTIONAL_VALUE_OPTIONS, FLAG_OPTIONS = SRUN.values, SRUN.optional, SRUN.flags
SHORT_VALUE, SHORT_OPTIONAL = SRUN.short_values, SRUN.short_optional


def read_options(words: list[str], table: OptionTable = SRUN) -> tuple[list[tuple[str, str | None]], int, int]:
    """The options at the start of ``words`` as (long name, value or None), the number of words
    they take, and where the program starts (after a ``--``, one further):
    ``["-N2", "--gpus", "4", "-l", "run.sh"]`` -> ``([("nodes", "2"), ("gpus", "4"), ("label", None)], 4, 4)``.
    A long name is the option an abbreviation stands for; a short option the table cannot
    name keeps its letter. An unknown long option is taken for a flag, unless written with
    ``=``."""
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":  # the end of the options
            return pairs, i, i + 1
        if not word.startswith("-") or word == "-":
            break
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            name = table.long_name(name)
            if not eq and name in table.values and i + 1 < len(words):
                i += 1  # its value is the next word
                value, eq = words[i], "="
            pairs.append((name, value if eq else None))
        else:
            for j, letter in enumerate(word[1:], 1):
                name = table.short_names.get(letter, letter)
                rest = word[j + 1:]
                if letter in table.short_optional:
                    pairs.append((name, rest or None))  # the rest of the word, if any, is its value
                    break
                if letter in table.short_values:
                    if not rest and i + 1 < len(words):
                        i += 1  # -N 2: the value is the next word
                        rest = words[i]
                    pairs.append((name, rest))  # -N2: the rest of the word is the value
                    break
                pairs.append((name, None))
        i += 1
    return pairs, i, i


def split_srun(words: list[str]) -> tuple[list[str], list[str]]:
    """``srun``'s arguments (without ``srun``) as (its options, the program and its
    arguments): ``["-N", "1", "--gpus", "2", "python", "train.py"]`` ->
    ``(["-N", "1", "--gpus", "2"], ["python", "train.py"])``. An option srun does not know
    is taken for a flag, unless written with ``=``."""
    _, end, program = read_options(words, SRUN)
    return words[:end], words[program:]
