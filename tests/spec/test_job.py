"""Reading sbatch scripts and options."""

import pytest

from jupyter_gtc.exceptions import SpecError
from jupyter_gtc.spec.job import option, parse_options, safe_name, sbatch_directives

SCRIPT = """#!/bin/bash
# a comment
#SBATCH --time 00:10:00
#SBATCH -J pretrain --nodes 2   # trailing comment

srun python train.py
#SBATCH --ignored-after-the-first-command
"""


def test_directives_stop_at_the_first_command():
    assert sbatch_directives(SCRIPT) == ["--time", "00:10:00", "-J", "pretrain", "--nodes", "2"]


def test_later_options_win():
    pairs = parse_options(sbatch_directives(SCRIPT) + ["--job-name=override", "-a0-3", "--requeue"])
    assert option(pairs, "job-name") == "override"
    assert option(pairs, "array") == "0-3"
    assert ("requeue", None) in pairs and option(pairs, "nodes") == "2"


def test_a_stray_word_is_an_error_naming_it():
    with pytest.raises(SpecError) as info:
        parse_options(["--nodes", "2", "3"])
    assert info.value.value == "3"


def test_safe_name_for_folders():
    assert safe_name("a'; rm -rf /") == "a_rm_-rf"
    assert safe_name("...") == "job"
