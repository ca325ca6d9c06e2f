"""srun's command line split as srun splits it: its options with their values, then the program."""

from __future__ import annotations

import pytest

from jupyter_gtc.slurm.srun import split_srun


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
