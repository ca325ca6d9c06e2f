"""sbatch's options as jupyter_gtc reads them: the table against the installed sbatch, the
guess at a misspelt option, and the GPUs per node that a job's options ask for."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from jupyter_gtc.slurm.sbatch import SBATCH, explain_refusal, gpus_per_node_asked, read_sbatch_options, suggest_option


@pytest.fixture(scope="module")
def sbatch_env(tmp_path_factory) -> dict[str, str]:
    """An environment in which sbatch answers --help and --usage: they need a slurm.conf to
    read, not a cluster."""
    if shutil.which("sbatch") is None:
        pytest.skip("sbatch is not installed")
    conf = tmp_path_factory.mktemp("conf") / "slurm.conf"
    conf.write_text("ClusterName=table\nSlurmctldHost=localhost\n")
    return {"PATH": "/usr/bin:/bin:/usr/local/bin", "SLURM_CONF": str(conf)}


def sbatch(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sbatch", *argv], env=env, capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


# `  -N, --nodes=N   ...`, `      --export[=names]  ...`, `  -B  --extra-node-info=S[:C[:T]]`
HELP_LINE = re.compile(r"^\s+(?:-(\w),?\s+)?--([A-Za-z][\w-]*)(\[?=)?", re.M)


def test_the_table_has_every_option_the_installed_sbatch_lists(sbatch_env):
    listed = HELP_LINE.findall(sbatch(sbatch_env, "--help").stdout)
    assert len(listed) > 80, listed  # the help was read
    for letter, name, value in listed:
        assert name in SBATCH.long_options, f"--{name} is in `sbatch --help` but not in slurm/sbatch.py"
        if value == "=":
            assert name in SBATCH.values, f"--{name} takes a value"
        if letter:
            assert SBATCH.short_names[letter] == name
            assert (letter in SBATCH.short_values) == (value == "=" or name in SBATCH.values), letter


def test_sbatch_knows_every_option_of_the_table(sbatch_env):
    """Each option, given a value, is one sbatch reads (it may refuse the value, never the option)."""
    unknown = [name for name in sorted(SBATCH.long_options)
               if "unrecognized option '--" in sbatch(sbatch_env, f"--{name}=x", "--usage").stderr]
    assert unknown == []


def test_a_misspelt_option_gets_a_guess_and_a_strange_one_none():
    stderr = "sbatch: unrecognized option '--gpu-per-node=2'\nTry \"sbatch --help\" for more information"
    assert explain_refusal(stderr) == ("sbatch: unrecognized option '--gpu-per-node=2'; did you mean --gpus-per-node?"
                                       "\nTry \"sbatch --help\" for more information")
    assert suggest_option("job_name") == "job-name" and suggest_option("partion") == "partition"
    assert suggest_option("no-such-option") is None
    assert explain_refusal("sbatch: unrecognized option '--no-such-option'") == (
        "sbatch: unrecognized option '--no-such-option'")


@pytest.mark.parametrize(("words", "pairs"), [
    (["--gpus-per-node", "9"], [("gpus-per-node", "9")]),
    (["--gpus-per-node=9"], [("gpus-per-node", "9")]),
    (["--gpus-per-n=9"], [("gpus-per-node", "9")]),  # getopt_long's unique abbreviation
    (["-G", "4", "-N2", "-H"], [("gpus", "4"), ("nodes", "2"), ("hold", None)]),
    (["-HN", "2", "--exclusive", "--requeue"],
     [("hold", None), ("nodes", "2"), ("exclusive", None), ("requeue", None)]),
])
def test_options_read_as_sbatch_reads_them(words, pairs):
    assert read_sbatch_options(words) == pairs


@pytest.mark.parametrize(("words", "asked"), [
    (["--gpus-per-node=9"], [(9, "--gpus-per-node=9 asks for 9")]),
    (["--gpus-per-node", "h100:3"], [(3, "--gpus-per-node=h100:3 asks for 3")]),
    (["--gres=gpu:9"], [(9, "--gres=gpu:9 asks for 9")]),
    (["--gres", "gpu:h100:2,shard:1"], [(2, "--gres=gpu:h100:2,shard:1 asks for 2")]),
    (["--gres=gpu"], [(1, "--gres=gpu asks for 1")]),
    (["-G", "18", "--nodes", "2"], [(9, "--gpus=18 on --nodes=2 asks for 9 per node")]),
    (["--gpus=17", "-N", "1-2"], [(9, "--gpus=17 on --nodes=1-2 asks for 9 per node")]),  # at best 2 nodes
    (["--gpus-per-node=9", "--gpus-per-node=2"], [(2, "--gpus-per-node=2 asks for 2")]),  # the last wins
    (["--gpus=18"], []),  # Slurm chooses how many nodes
    (["--gres=shard:2", "--gpus-per-node=a100"], []),  # no GPU count to read
])
def test_gpus_asked_of_each_node(words, asked):
    assert [(a.per_node, a.how) for a in gpus_per_node_asked(read_sbatch_options(words))] == asked
