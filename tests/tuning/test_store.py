"""The studies table: records, stop requests, and the driver claim that keeps two processes
from driving one study."""

from __future__ import annotations

import pytest

from jupyter_gtc.exceptions import StudyExists, StudyNotFound
from jupyter_gtc.state import Store
from jupyter_gtc.state.store import StudyRecord


def record(name: str, **kw) -> StudyRecord:
    return StudyRecord(name=name, cluster="c", spec={"max_trial_count": 3}, state="RUNNING",
                       study_dir=f"/s/{name}", storage=f"sqlite:////s/{name}/optuna.db", **kw)


def test_studies_are_recorded_found_and_updated(tmp_path):
    store = Store(tmp_path / "state.db")
    assert store.schema_version >= 3
    store.add_study(record("a"))
    store.add_study(record("b", sampler="tpe: why"))
    with pytest.raises(StudyExists, match="resume it"):
        store.add_study(record("a"))
    assert [r.name for r in store.find_studies()] == ["b", "a"]
    assert store.find_studies("other") == []
    store.update_study("a", state="STOPPING", reason="asked", stop_trials=[2, 5])
    a = Store(tmp_path / "state.db").get_study("a")  # another process's view
    assert (a.state, a.reason, a.stop_trials, a.spec) == ("STOPPING", "asked", [2, 5], {"max_trial_count": 3})
    with pytest.raises(StudyNotFound, match="known studies: a, b"):
        store.get_study("ghost")
    with pytest.raises(ValueError):
        store.update_study("a", cluster="elsewhere")


def test_one_driver_at_a_time(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_study(record("s", driver_pid=100, driver_host="h1", heartbeat_at=1.0))
    holder = store.claim_study("s", 200, "h2", holder_alive=lambda r: True)
    assert (holder.driver_pid, holder.driver_host) == (100, "h1")  # refused: the holder lives
    assert store.claim_study("s", 200, "h2", holder_alive=lambda r: False) is None  # taken over
    s = store.get_study("s")
    assert (s.driver_pid, s.driver_host) == (200, "h2") and s.heartbeat_at > 1.0
    assert store.claim_study("s", 200, "h2", holder_alive=lambda r: True) is None  # its own claim
