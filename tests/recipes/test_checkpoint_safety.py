"""A recipe's DCP checkpoint is read without running a pickle: whoever can write a checkpoint
folder (a shared file system, the storage emulator, someone else's ``--init-from`` folder) put
code in DCP's ``.metadata`` or in a non-tensor item, which DCP itself unpickles as it stands."""

from __future__ import annotations

import pickle
import warnings

import pytest

torch = pytest.importorskip("torch")


class _RunsCode:
    """Unpickled, it creates ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _model_and_optimizer():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    return model, optimizer


def _state(model, optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    return {"model": model_sd, "optim": optim_sd}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DCP warns that it runs without a process group
        yield


def test_a_checkpoint_round_trips_through_the_safe_reader(tmp_path):
    import torch.distributed.checkpoint as dcp

    from jupyter_gtc.recipes.checkpoint import _safe_load

    model, optimizer = _model_and_optimizer()
    dcp.save(_state(model, optimizer), checkpoint_id=str(tmp_path / "step-1"))
    fresh = torch.nn.Linear(2, 1)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters())
    state = _state(fresh, fresh_optimizer)
    _safe_load(state, tmp_path / "step-1")
    assert torch.equal(state["model"]["weight"], model.weight)
    assert state["optim"]["param_groups"][0]["lr"] == optimizer.param_groups[0]["lr"]


def test_a_planted_metadata_pickle_is_never_run(tmp_path):
    import torch.distributed.checkpoint as dcp

    from jupyter_gtc.recipes.checkpoint import _safe_load

    model, optimizer = _model_and_optimizer()
    folder = tmp_path / "step-1"
    dcp.save(_state(model, optimizer), checkpoint_id=str(folder))
    marker = tmp_path / "pwned"
    (folder / ".metadata").write_bytes(pickle.dumps(_RunsCode(marker)))
    with pytest.raises(pickle.UnpicklingError, match="may not name io.open"):
        _safe_load(_state(model, optimizer), folder)
    assert not marker.exists()


def test_a_planted_non_tensor_item_is_never_run(tmp_path):
    import torch.distributed.checkpoint as dcp

    from jupyter_gtc.recipes.checkpoint import _safe_load

    marker = tmp_path / "pwned"
    folder = tmp_path / "step-1"
    dcp.save({"model": {"weight": torch.ones(2)}, "extra": _RunsCode(marker)}, checkpoint_id=str(folder))
    assert not marker.exists()  # saving runs nothing: DCP pickled it as a bytes item
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL io.open"):
        _safe_load({"model": {"weight": torch.zeros(2)}, "extra": None}, folder)
    assert not marker.exists()
