"""srun's command line read as srun reads it: its options (with their values) up to the
program, then the program and its arguments. Pure.

srun parses with ``getopt_long`` and stops at the first word that is not an option, so
``srun -N 1 --gpus 2 python train.py`` runs ``python train.py``: ``1`` and ``2`` are values.
The tables are srun's own (Slurm's ``src/common/slurm_opt.c``: the options srun accepts, in
22.05 and since; ``--uid``/``--gid`` from before).
"""

from __future__ import annotations

# Long options that take a value: ``--nodes 2`` or ``--nodes=2``.
VALUE_OPTIONS = frozenset("""
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
""".split())
# Long options whose value is optional, so only ever written ``--exclusive=user``: a word
# after them is the next option or the program.
OPTIONAL_VALUE_OPTIONS = frozenset("""
    bcast compress exclusive external-launcher immediate kill-on-bad-exit nice no-kill oom-kill-step
    overlap propagate pty resv-ports send-libs
""".split())
# Long options that take none.
FLAG_OPTIONS = frozenset("""
    async consolidate-segments contiguous debugger-test disable-status exact help hold interactive label
    multi-prog no-allocate overcommit oversubscribe parsable preserve-env quiet quit-on-interrupt reboot
    spread-job spread-segments stepmgr test-only unbuffered usage use-min-nodes verbose version
    wait-for-children whole
""".split())
# Short options: those that take a value (``-N 2``, ``-N2``), those whose value is optional
# (only ever attached: ``-I60``), the rest are flags (``-l``, and bundled: ``-lu``).
SHORT_VALUE = frozenset("ABCDFGJLMNSTWbcdeimnopqrtwx")
SHORT_OPTIONAL = frozenset("IKk")


def split_srun(words: list[str]) -> tuple[list[str], list[str]]:
    """``srun``'s arguments (without ``srun``) as (its options, the program and its
    arguments): ``["-N", "1", "--gpus", "2", "python", "train.py"]`` ->
    ``(["-N", "1", "--gpus", "2"], ["python", "train.py"])``. An option srun does not know
    is taken for a flag, unless written with ``=``."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":  # the end of the options
            return words[:i], words[i + 1:]
        if not word.startswith("-") or word == "-":
            break
        if word.startswith("--"):
            name, eq, _ = word[2:].partition("=")
            if not eq and _long_name(name) in VALUE_OPTIONS:
                i += 1  # its value is the next word
        else:
            for j, letter in enumerate(word[1:], 1):
                if letter in SHORT_OPTIONAL:
                    break  # the rest of the word, if any, is its value
                if letter in SHORT_VALUE:
                    if j == len(word) - 1:
                        i += 1  # -N 2: the value is the next word
                    break  # -N2: the rest of the word is the value
        i += 1
    return words[:i], words[i:]


def _long_name(name: str) -> str:
    """The option that ``name`` abbreviates, as getopt_long allows (``--ntasks-per-n``), when
    exactly one option starts with it; else ``name``."""
    known = VALUE_OPTIONS | OPTIONAL_VALUE_OPTIONS | FLAG_OPTIONS
    if name in known:
        return name
    candidates = [option for option in known if option.startswith(name)]
    return candidates[0] if len(candidates) == 1 else name
