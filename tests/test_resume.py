"""jupyter_gtc.resume: a script killed after its checkpoint carries on from there, with the
uninterrupted run's losses and each step once in TensorBoard; partial checkpoints are never
read. The same under a requeue on the local cluster: tests/recipes/test_recipe_jobs.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from jupyter_gtc.resume import Checkpoints  # noqa: E402

SCRIPT = [sys.executable, "-m", "jupyter_gtc.examples.resumable_regression", "--steps", "30", "--checkpoint_every", "10"]


def run(folder: Path, *args: str) -> str:
    env = {**os.environ, "AIP_CHECKPOINT_DIR": str(folder / "ckpt"), "AIP_TENSORBOARD_LOG_DIR": str(folder / "tb"),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*SCRIPT, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def losses(log: str) -> dict[int, str]:
    return {int(s): v for s, v in re.findall(r"^step (\d+)/\d+ loss (\S+)$", log, re.M)}


def test_a_killed_run_resumes_from_its_checkpoint_with_the_uninterrupted_runs_losses(tmp_path):
    (tmp_path / "whole").mkdir()
    whole = losses(run(tmp_path / "whole"))
    folder = tmp_path / "killed"
    folder.mkdir()
    env = {**os.environ, "AIP_CHECKPOINT_DIR": str(folder / "ckpt"), "AIP_TENSORBOARD_LOG_DIR": str(folder / "tb"),
           "OMP_NUM_THREADS": "1"}
    # Killed at step 17, after its checkpoint at 10: steps 11-17 are done twice.
    first = subprocess.Popen([*SCRIPT, "--hold_at_step", "17", "--hold_until", "never"], cwd=folder, env=env,
                             stdout=subprocess.PIPE, text=True)
    lines = []
    for line in first.stdout:
        lines.append(line)
        if line.startswith("step 17/"):
            break
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert sorted(losses("".join(lines))) == list(range(1, 18))
    second = run(folder)
    assert re.search(r"^resuming from \S+/step-00000010 \(step 10\)$", second, re.M), second
    assert sorted(losses(second)) == list(range(11, 31))
    assert losses(second) == {s: whole[s] for s in range(11, 31)}  # dropout and batches drawn as before

    # TensorBoard shows each step once: the second run's purge_step dropped the first's 11-17.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = EventAccumulator(str(folder / "tb"))
    board.Reload()
    steps = [e.step for e in board.Scalars("train/loss")]
    assert steps == list(range(1, 31))


def test_a_partial_checkpoint_is_never_read_and_is_removed(tmp_path):
    model = torch.nn.Linear(2, 1)
    checkpoints = Checkpoints(tmp_path, keep=2)
    for step in (10, 20, 30):
        checkpoints.save(step, model=model, extra={"seen": step * 64})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000020", "step-00000030"]  # keep=2
    killed = tmp_path / "step-00000040.partial"
    killed.mkdir()
    (killed / "states.pt").write_bytes(b"half a file")

    again = Checkpoints(tmp_path)
    assert again.restore(model=torch.nn.Linear(2, 1)) == 30
    assert again.extra == {"seen": 1920}
    assert not killed.exists()


def test_restoring_a_name_that_was_not_saved_names_it(tmp_path):
    Checkpoints(tmp_path).save(5, model=torch.nn.Linear(2, 1))
    with pytest.raises(KeyError, match=r"holds no state for optimizer \(it has model\)"):
        Checkpoints(tmp_path).restore(model=torch.nn.Linear(2, 1), optimizer=object())


def test_a_first_start_restores_nothing_and_keep_must_keep_one(tmp_path):
    assert Checkpoints(tmp_path / "empty").restore(model=torch.nn.Linear(2, 1)) == 0
    with pytest.raises(ValueError, match="keep=0"):
        Checkpoints(tmp_path, keep=0)


class _RunsCode:
    """Unpickled, it creates ``marker``: what another user who can write the checkpoint folder
    (a shared file system, the storage emulator) would put in a states.pt."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(checkpoint: Path, marker: Path, fmt: int | None) -> None:
    import json

    checkpoint.mkdir(parents=True)
    torch.save({"model": _RunsCode(marker)}, checkpoint / "states.pt")
    torch.save({"python": _RunsCode(marker)}, checkpoint / "rng-0.pt")
    meta = {"step": 99, "objects": ["model"], "extra": {}, "time": 0.0}
    (checkpoint / "checkpoint.json").write_text(json.dumps(meta if fmt is None else {**meta, "format": fmt}))


@pytest.mark.parametrize("fmt", [None, 2], ids=["older-format", "current-format"])
def test_a_planted_pickle_is_never_run_and_restore_says_why(tmp_path, fmt):
    from jupyter_gtc.exceptions import CheckpointRefused

    marker = tmp_path / "pwned"
    _plant(tmp_path / "ckpt" / "step-00000099", marker, fmt)
    with pytest.raises(CheckpointRefused) as refused:
        Checkpoints(tmp_path / "ckpt").restore(model=torch.nn.Linear(2, 1))
    assert not marker.exists()
    said = str(refused.value)
    assert "step-00000099" in said and ("could run" in said or "can run" in said)


def test_a_checkpoint_of_the_older_format_resumes_without_its_pickled_generators(tmp_path, capsys):
    """After an upgrade a requeued job must still resume: its states.pt holds state_dicts only
    (loaded as before), and the generators' pickle beside it is left unread."""
    import json

    marker = tmp_path / "pwned"
    checkpoint = tmp_path / "ckpt" / "step-00000005"
    checkpoint.mkdir(parents=True)
    model = torch.nn.Linear(2, 1)
    torch.save({"model": model.state_dict()}, checkpoint / "states.pt")
    torch.save({"python": _RunsCode(marker)}, checkpoint / "rng-0.pt")
    (checkpoint / "checkpoint.json").write_text(json.dumps({"step": 5, "objects": ["model"], "extra": {}, "time": 0}))
    restored = torch.nn.Linear(2, 1)
    assert Checkpoints(tmp_path / "ckpt").restore(model=restored) == 5
    assert torch.equal(restored.weight, model.weight) and not marker.exists()
    assert "older jupyter_gtc" in capsys.readouterr().out


def test_the_random_generators_round_trip_exactly_without_pickle(tmp_path):
    import json
    import pickle
    import random

    import numpy

    random.seed(1)
    numpy.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1)  # a cached gaussian in Python's state, and in numpy's
    numpy.random.standard_normal()
    model = torch.nn.Linear(2, 1)
    Checkpoints(tmp_path).save(7, model=model)
    expected = (random.random(), random.gauss(0, 1), numpy.random.standard_normal(3).tolist(),
                numpy.random.randint(0, 1 << 30), torch.rand(4).tolist())

    random.seed(9)
    numpy.random.seed(9)
    torch.manual_seed(9)
    restored = torch.nn.Linear(2, 1)
    assert Checkpoints(tmp_path).restore(model=restored) == 7
    assert (random.random(), random.gauss(0, 1), numpy.random.standard_normal(3).tolist(),
            numpy.random.randint(0, 1 << 30), torch.rand(4).tolist()) == expected
    assert torch.equal(restored.weight, model.weight)

    # What was written loads under weights_only=True with nothing allowed beyond torch's own.
    folder = tmp_path / "step-00000007"
    assert json.loads((folder / "checkpoint.json").read_text())["format"] == 2
    for name in ("states.pt", "rng-0.pt"):
        torch.load(folder / name, weights_only=True)
    with pytest.raises(pickle.UnpicklingError):  # the older format's rng file, as a contrast
        torch.save({"numpy": numpy.random.get_state()}, tmp_path / "old.pt")
        torch.load(tmp_path / "old.pt", weights_only=True)
