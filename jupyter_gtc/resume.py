"""Resume any training script from its newest checkpoint, as the recipes do.

A job submitted with ``--requeue`` starts again from the top when its node fails (the
supervisor requeues it within seconds). With this helper it carries on from its newest
complete checkpoint instead of step 1, and its TensorBoard scalars show each step once::

    from jupyter_gtc.resume import Checkpoints

    checkpoints = Checkpoints()              # in AIP_CHECKPOINT_DIR, as the job contract sets it
    start = checkpoints.restore(model=model, optimizer=optimizer, scheduler=scheduler)  # 0: a first start
    with checkpoints.summary_writer() as writer:   # drops the steps a killed attempt wrote after `start`
        for step in range(start + 1, steps + 1):
            ...
            if step % 50 == 0:
                checkpoints.save(step, model=model, optimizer=optimizer, scheduler=scheduler)

Anything with ``state_dict()``/``load_state_dict()`` can be saved by name. Each checkpoint is a
folder ``step-N`` written as ``step-N.partial`` and renamed once complete, so a job killed in
the middle of a save leaves nothing that is ever read (the next start removes it). Rank 0
writes the states (under torch.distributed every rank holds the same ones, as in DDP); every
rank writes its own random number generators' state, so a resumed run draws what the
uninterrupted run would have drawn. The newest ``keep`` checkpoints are kept.

Nothing is ever unpickled: a checkpoint folder may be writable by others (a shared file
system, a storage emulator), and a pickle runs whatever code its writer put in it. Every file
is loaded with ``torch.load(weights_only=True)``, which takes tensors and plain data only, and
the random generators' state is saved as such (uint8 and int64 tensors, ints, floats). A file
that holds anything else is refused with ``CheckpointRefused``, and nothing of it is loaded; a
checkpoint of the older format (which pickled the generators' state) resumes without that state.

A multi-node job can also restart inside itself, keeping its processes: ``in_job`` (module
``injob``; ``jupyter_gtc/examples/injob_regression.py`` is a whole script).

``jupyter_gtc/examples/resumable_regression.py`` is a whole script that uses it; the recipes
keep their own (``recipes/checkpoint.py``), for FSDP's sharded states.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

from .exceptions import CheckpointRefused
from .injob import InJob, InJobFailed, in_job  # noqa: F401 - the restart inside the job, for any script

CHECKPOINT_DIR_ENV = "AIP_CHECKPOINT_DIR"
TENSORBOARD_DIR_ENV = "AIP_TENSORBOARD_LOG_DIR"
MARKER = "checkpoint.json"  # written last inside the .partial folder: a complete checkpoint has it
# The marker's "format": 2 since the random generators' state is tensors and plain data; a
# checkpoint without one pickled it (numpy's and Python's states as objects).
FORMAT = 2


class Checkpoints:
    def __init__(self, folder: str | os.PathLike | None = None, keep: int = 2):
        """``folder``: where checkpoints go, by default ``$AIP_CHECKPOINT_DIR`` (the job's
        checkpoint folder), else ``./checkpoints``. ``keep``: how many of the newest to keep."""
        if keep < 1:
            raise ValueError(f"keep={keep}: at least the newest checkpoint must be kept (keep >= 1)")
        self.folder = Path(folder or os.environ.get(CHECKPOINT_DIR_ENV) or "checkpoints")
        self.keep = keep
        self.step = 0  # the step restored from, once restore() has run
        self.extra: dict[str, Any] = {}

    def complete(self) -> list[Path]:
        """The complete checkpoints, oldest first."""
        return sorted((p for p in self.folder.glob("step-*[0-9]") if (p / MARKER).exists()), key=_step_of)

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or None."""
        done = self.complete()
        return done[-1] if done else None

    def restore(self, **stateful: Any) -> int:
        """Load each named object's state from the newest complete checkpoint, and the random
        number generators'; returns its step (0 where there is none: a first start). The
        checkpoint's ``extra`` is in ``self.extra``. A partial checkpoint left by a killed
        attempt is removed."""
        if _rank() == 0 and self.folder.is_dir():
            for stale in self.folder.glob("step-*.partial"):
                shutil.rmtree(stale, ignore_errors=True)
        _barrier()
        found = self.latest()
        if found is None:
            return 0
        meta = json.loads((found / MARKER).read_text())
        missing = sorted(set(stateful) - set(meta["objects"]))
        if missing:
            raise KeyError(f"{found} holds no state for {', '.join(missing)} (it has {', '.join(meta['objects']) or 'none'}); "
                           "restore the names that save() was given")
        states = _load(found / "states.pt")  # state_dicts: tensors and plain data, in either format
        rng = found / f"rng-{_rank()}.pt"
        generators = None
        if meta.get("format") != FORMAT:
            # An older jupyter_gtc pickled the generators' state (numpy's and Python's as
            # objects), which is never loaded: the run resumes with fresh random streams.
            print(f"{found} was written by an older jupyter_gtc: its random generators' state is a pickle, "
                  f"which is not loaded; resuming with the model's and optimizer's state only (the next "
                  f"save() writes the generators too)", flush=True)
        elif rng.exists():
            generators = _load(rng)
        for name, obj in stateful.items():
            obj.load_state_dict(states[name])
        if generators is not None:
            _set_rng_state(generators)
        self.step, self.extra = meta["step"], meta.get("extra", {})
        print(f"resuming from {found} (step {self.step})", flush=True)
        return self.step

    def save(self, step: int, *, extra: dict[str, Any] | None = None, **stateful: Any) -> Path:
        """Write ``step-N`` with each named object's ``state_dict()``, every rank's random number
        generators and ``extra`` (JSON: a data loader's position, a best score...). Every rank
        calls it. Returns the checkpoint's folder."""
        import torch

        final = self.folder / f"step-{step:08d}"
        partial = final.with_name(final.name + ".partial")
        partial.mkdir(parents=True, exist_ok=True)
        torch.save(_rng_state(), partial / f"rng-{_rank()}.pt")
        _barrier()  # every rank's generators are in before the folder becomes complete
        if _rank() == 0:
            torch.save({name: obj.state_dict() for name, obj in stateful.items()}, partial / "states.pt")
            (partial / MARKER).write_text(json.dumps({"step": step, "objects": sorted(stateful), "extra": extra or {},
                                                      "time": time.time(), "format": FORMAT}))
            if final.exists():  # this step saved again after a resume from an earlier one
                shutil.rmtree(final)
            os.replace(partial, final)
            for old in self.complete()[:-self.keep]:
                shutil.rmtree(old, ignore_errors=True)
        _barrier()
        return final

    def summary_writer(self, log_dir: str | os.PathLike | None = None, **kwargs: Any):
        """A TensorBoard ``SummaryWriter`` in ``$AIP_TENSORBOARD_LOG_DIR`` (else ``./logs``),
        which jupyter_gtc's plots read. After a restore it purges the steps past the checkpoint
        that the killed attempt wrote (``purge_step``), so TensorBoard shows each step once, as
        ``job.metrics()`` does. Call it on rank 0 only, after restore()."""
        from torch.utils.tensorboard import SummaryWriter

        log_dir = log_dir or os.environ.get(TENSORBOARD_DIR_ENV) or "logs"
        kwargs.setdefault("purge_step", self.step + 1 if self.step else None)
        kwargs.setdefault("flush_secs", 1)
        return SummaryWriter(log_dir=str(log_dir), **kwargs)


def _step_of(path: Path) -> int:
    return int(path.name.removeprefix("step-"))


def _rank() -> int:
    """This process's rank: torch.distributed's once it is set up, else torchrun's or srun's."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except ImportError:
        pass
    return int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def _load(path: Path) -> Any:
    """A file of tensors and plain data; ``CheckpointRefused`` for one that holds anything else
    (torch's restricted unpickler refuses it before any of it runs)."""
    import pickle

    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise CheckpointRefused(str(path), (
            f"{path} holds more than tensors and plain data, so it is not loaded (loading it could run code "
            f"its writer put in it: {first[:200]}). Save only state_dict()s, or, if someone else wrote it, "
            f"remove its checkpoint folder {path.parent}")) from None


def _rng_state() -> dict[str, Any]:
    """Every random generator's state as tensors and plain data (``torch.load`` with
    ``weights_only=True`` takes them; pickled tuples and numpy arrays it would refuse)."""
    import torch

    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64), "gauss_next": gauss_next},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy
    except ImportError:
        return state
    kind, keys, pos, has_gauss, cached = numpy.random.get_state()
    state["numpy"] = {"kind": str(kind), "keys": torch.from_numpy(keys.astype(numpy.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    import torch

    python = state["python"]
    random.setstate((python["version"], tuple(python["state"].tolist()), python["gauss_next"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy

        saved = state["numpy"]
        numpy.random.set_state((saved["kind"], saved["keys"].numpy().astype(numpy.uint32), saved["pos"],
                                saved["has_gauss"], saved["cached_gaussian"]))
