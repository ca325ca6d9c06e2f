"""`gtc ... list` tables at a terminal's width: ids and states whole, names get what is left,
columns that say little go first; an empty list says how to make the first one."""

from __future__ import annotations

import os
import subprocess
import sys

from jupyter_gtc.cli_tables import JOBS as JOB_COLUMNS, render



def job(id_, name, state, cluster="demo", user="alice"):
    return [id_, name, cluster, user, "yes", state, "0", "gpu-[0-1]", "312s", "5m ago"]


def gtc(*argv: str, home: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "GTC_HOME": home, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", *argv], capture_output=True, text=True,
                          timeout=120, env=env)


def test_at_80_columns_states_and_names_stay_whole():
    rows = [job("17", "longtraining-run-llama", "CANCELLED"), job("18", "sft-gemma-2b-lr3e-5", "OUT_OF_MEMORY"),
            job("19", "eval", "NODE_FAIL")]
    text = render(JOB_COLUMNS, rows, width=80)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    for whole in ("CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "longtraining-run-llama", "sft-gemma-2b-lr3e-5"):
        assert whole in text, text
    assert "…" not in text
    # The cluster, user and "ours" every row shares are said once, not in a column each.
    assert text.splitlines()[0] == "(every row: ours yes, user alice, cluster demo)", text
    assert text.splitlines()[1].split() == ["ID", "NAME", "STATE", "EXIT", "NODES", "ELAPSED", "SUBMITTED"]


def test_a_wide_terminal_shows_every_column():
    text = render(JOB_COLUMNS, [job("17", "longtraining-run-llama", "CANCELLED")], width=200)
    assert text.splitlines()[0].split() == [c.header for c in JOB_COLUMNS]


def test_a_narrow_terminal_cuts_the_name_last_and_never_the_state():
    rows = [job("17", "a-very-long-training-run-name-that-goes-on-and-on", "OUT_OF_MEMORY", cluster="c1"),
            job("1234567", "x", "CANCELLED", cluster="c2", user="bob")]
    text = render(JOB_COLUMNS, rows, width=50)
    assert all(len(line) <= 50 for line in text.splitlines()), text
    assert "OUT_OF_MEMORY" in text and "CANCELLED" in text and "1234567" in text
    assert "a-very-long" in text and "…" in text  # the name gave way, after the columns that say less


def test_piped_without_columns_nothing_is_cut(monkeypatch, capsys):
    """`gtc job list | grep NAME` finds a long name: piped, with no COLUMNS, the table is not
    fitted to 80 columns (it was: the name ended in '…' and grep found nothing)."""
    name = "a-very-long-training-run-name-for-llama-8b-sft-lora-v2"
    rows = [job("1", name, "RUNNING")]
    monkeypatch.delenv("COLUMNS", raising=False)
    assert not sys.stdout.isatty()  # pytest captures it: a pipe, as `| grep` gives
    assert name in render(JOB_COLUMNS, rows) and "…" not in render(JOB_COLUMNS, rows)
    monkeypatch.setenv("COLUMNS", "60")  # a width asked for is still kept
    fitted = render(JOB_COLUMNS, rows)
    assert name not in fitted and all(len(line) <= 60 for line in fitted.splitlines())


def test_empty_lists_say_how_to_make_the_first(tmp_path):
    listed = gtc("cluster", "list", home=str(tmp_path))
    assert listed.returncode == 0
    assert "`gtc cluster create -f SPEC.yaml`" in listed.stdout and "examples/clusters/local-a3.yaml" in listed.stdout
    jobs = gtc("job", "list", home=str(tmp_path))
    assert jobs.returncode == 0 and "`gtc job submit SCRIPT.sbatch`" in jobs.stdout
    studies = gtc("study", "list", home=str(tmp_path))
    assert studies.returncode == 0 and "`gtc study create -f STUDY.yaml`" in studies.stdout
