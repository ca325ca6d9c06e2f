"""srun's command line split as srun splits it: its options with their values, then the program."""

from __future__ import annotations

import pytest

from jupyter_gtc.slurm.srun import read_options, split_srun


@pytest.mark.parametrize(("words", "options"), [
    (["-N", "1", "--gpus", "2"], ["-N", "1", "--gpus", "2"]),
    (["-N1", "--gpus=2"], ["-N1", "--gpus=2"]),
    (["-lN", "2", "-u"], ["-lN", "2", "-u"]),  # bundled flags, the last letter taking the next word
    (["-I60", "-K", "--exclusive", "--overlap"], ["-I60", "-K", "--exclusive", "--overlap"]),  # optional values
    (["--cpu-bind", "none", "--mem", "0"], ["--cpu-bind", "none", "--mem", "0"]),
    (["--ntasks-per-n", "1"], ["--ntasks-per-n", "1"]),  # a unique abbreviation, as getopt_long takes it
    (["--some-new-flag"], ["--some-new-flag"]),  # unknown to this Slurm: a flag
    ([], []),
])
def test_options_and_their_values_come_before_the_program(words, options):
    assert split_srun([*words, "python", "-u", "train.py", "--lr", "1"]) == (
        options, ["python", "-u", "train.py", "--lr", "1"])


def test_a_double_dash_ends_the_options():
    assert split_srun(["-N", "2", "--", "-weird-program", "x"]) == (["-N", "2"], ["-weird-program", "x"])


def test_options_are_read_with_their_values_by_long_name():
    words = ["-lN2", "--gpus", "4", "--ntasks-per-n=1", "-I", "--exclusive", "python", "-N", "9"]
    pairs, end, program = read_options(words)
    assert pairs == [("label", None), ("nodes", "2"), ("gpus", "4"), ("ntasks-per-node", "1"), ("immediate", None),
                     ("exclusive", None)]
    assert words[end:] == words[program:] == ["python", "-N", "9"]  # the program's own -N is not srun's
