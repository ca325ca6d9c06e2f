"""The SQLite state store: migrations, WAL, records shared between processes."""

import sqlite3
import subprocess
import sys

import pytest

from jupyter_gtc.exceptions import ClusterExists, ClusterNotFound
from jupyter_gtc.state import ClusterRecord, Store


def test_new_database_is_migrated_and_in_wal_mode(tmp_path):
    store = Store(tmp_path / "state.db")
    assert store.schema_version >= 1
    db = sqlite3.connect(tmp_path / "state.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'clusters'").fetchone()


def test_reopening_keeps_rows_and_does_not_migrate_twice(tmp_path):
    Store(tmp_path / "state.db").add_cluster(ClusterRecord("a", "local", "RUNNING", {"x": 1}))
    again = Store(tmp_path / "state.db")
    assert [r.name for r in again.list_clusters()] == ["a"]


def test_add_get_update_remove(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_cluster(ClusterRecord("a", "local", "CREATING", {"display_name": "a"}, {"dir": "/x"}))
    store.update_cluster("a", state="RUNNING", runtime={"dir": "/x", "port": 7})
    record = store.get_cluster("a")
    assert (record.state, record.runtime, record.spec) == ("RUNNING", {"dir": "/x", "port": 7}, {"display_name": "a"})
    assert record.updated_at >= record.created_at > 0
    store.add_event("a", "gpu-1", "detected", "its slurmd exited")
    store.add_event("a", "gpu-1", "down")
    assert [(e["node"], e["event"], e["detail"]) for e in store.events("a")] == [
        ("gpu-1", "detected", "its slurmd exited"), ("gpu-1", "down", "")]
    store.remove_cluster("a")
    with pytest.raises(ClusterNotFound):
        store.get_cluster("a")
    assert store.events("a") == []  # a new cluster of that name starts with none


def test_an_expected_update_happens_only_while_the_record_is_as_read(tmp_path):
    """Two processes that read the same busy record: the first to act wins, the second's
    change (made on what it read) is refused instead of undoing the first's."""
    store = Store(tmp_path / "state.db")
    owner = {"pid": 1234, "host": "h", "started": 1.5, "action": "scaling pool gpu to 3 node(s)"}
    store.add_cluster(ClusterRecord("a", "local", "SCALING", {}, owner=owner))
    read = store.get_cluster("a")
    assert read.owner == owner
    assert store.update_cluster("a", expect={"state": read.state, "owner": read.owner}, state="ERROR", owner=None)
    assert not store.update_cluster("a", expect={"state": read.state, "owner": read.owner}, state="RUNNING")
    assert (store.get_cluster("a").state, store.get_cluster("a").owner) == ("ERROR", None)
    assert store.update_cluster("a", expect={"state": "ERROR", "owner": None}, state="RUNNING")  # no owner: NULL
    with pytest.raises(ClusterNotFound):
        store.update_cluster("b", expect={"state": "RUNNING"}, state="ERROR")


def test_duplicate_name_is_refused_and_the_first_row_kept(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_cluster(ClusterRecord("a", "local", "RUNNING", {"v": 1}))
    with pytest.raises(ClusterExists):
        store.add_cluster(ClusterRecord("a", "local", "CREATING", {"v": 2}))
    assert store.get_cluster("a").spec == {"v": 1}


def test_not_found_names_the_known_clusters(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_cluster(ClusterRecord("alpha", "local", "RUNNING", {}))
    with pytest.raises(ClusterNotFound) as info:
        store.get_cluster("beta")
    assert "alpha" in str(info.value)


def test_rows_written_by_another_process_are_seen(tmp_path):
    code = ("import sys; from jupyter_gtc.state import Store, ClusterRecord; "
            "Store(sys.argv[1]).add_cluster(ClusterRecord('other', 'local', 'RUNNING', {'k': [1, 2]}))")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "state.db")], check=True, timeout=60)
    assert Store(tmp_path / "state.db").get_cluster("other").spec == {"k": [1, 2]}
