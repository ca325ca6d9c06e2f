"""The registry on real SQLite, without a cluster: models registered from folders, versions,
aliases with Vertex's rules, refusals that change nothing, the history, copies into
$GTC_HOME/models/, and the migration an older state.db gets when it is opened."""

from __future__ import annotations

import os
import sqlite3
import stat
from importlib import resources

import pytest

from jupyter_gtc.exceptions import ModelConflict, ModelNotFound, SpecError
from jupyter_gtc.registry import ModelRef, parse_ref
from jupyter_gtc.services.models import ModelService
from jupyter_gtc.state import open_store
from jupyter_gtc.state.models import ModelTables


@pytest.fixture
def registry(tmp_path):
    """A registry in a state store of its own (no jobs: its JobService is never asked)."""
    home = tmp_path / "home"
    return ModelService(open_store(home), jobs=None, home=home)


@pytest.fixture
def folder(tmp_path):
    model = tmp_path / "saved" / "model"
    (model / "tokenizer").mkdir(parents=True)
    (model / "weights.bin").write_bytes(os.urandom(3000))
    (model / "tokenizer" / "vocab.json").write_text('{"a": 1}')
    return model


def test_versions_count_from_one_and_the_first_holds_default(registry, folder):
    first = registry.register(model="tiny", artifact_uri=str(folder), description="first try",
                              labels={"team": "nlp"})
    second = registry.register(model="tiny", artifact_uri=str(folder), alias="prod")
    assert (first.version, first.aliases) == (1, ["default"])
    assert (second.version, second.aliases) == (2, ["prod"])
    assert registry.get("tiny") == first and registry.get("tiny@prod") == second
    assert registry.get("tiny@2") == second and registry.get("tiny@default") == first
    assert [v.version for v in first.versions] == [1, 2]
    assert first.description == "first try" and first.labels == {"team": "nlp"}
    assert second.artifact_uri == str(folder) and not second.record.copied


def test_an_alias_moves_and_default_moves_but_is_never_removed(registry, folder):
    one = registry.register(model="m", artifact_uri=str(folder), alias="prod")
    two = registry.register(model="m", artifact_uri=str(folder))
    two.set_alias("prod")
    assert one.aliases == ["default"] and two.aliases == ["prod"]
    two.set_alias("default")
    assert one.aliases == [] and two.aliases == ["default", "prod"]
    assert registry.get("m") == two
    two.set_alias("-prod")
    assert two.aliases == ["default"]
    with pytest.raises(SpecError) as e:
        two.set_alias("-default")
    assert e.value.value == "-default" and "cannot be removed, only moved" in str(e.value)
    with pytest.raises(SpecError, match="has no alias 'prod'"):
        two.set_alias("-prod")
    history = [(e["event"], e["version"], e["detail"].get("alias"), e["detail"].get("from")) for e in two.events]
    assert history == [("register", 1, None, None), ("alias", 1, "default", None), ("alias", 1, "prod", None),
                       ("register", 2, None, None), ("alias", 2, "prod", 1), ("alias", 2, "default", 1),
                       ("unalias", 2, "prod", None)]
    assert all(e["user"] and e["time"] > 0 for e in two.events)


def test_bad_aliases_and_numeric_ones_are_refused_and_change_nothing(registry, folder):
    model = registry.register(model="m", artifact_uri=str(folder))
    for alias, says in (("Prod", "lowercase letter first"), ("7", "cannot be a number")):
        with pytest.raises(SpecError) as e:
            model.set_alias(alias)
        assert e.value.value == alias and says in str(e.value)
        with pytest.raises(SpecError):
            registry.register(model="m", artifact_uri=str(folder), alias=alias)
    # Several at once are all or none: the good one before the bad one is not applied.
    with pytest.raises(SpecError):
        registry.merge_aliases(ModelRef("m", version=1), ["prod", "Bad"])
    assert model.aliases == ["default"] and [v.version for v in model.versions] == [1]
    assert [e["event"] for e in model.events] == ["register", "alias"]


def test_a_refused_registration_leaves_nothing(registry, folder, tmp_path):
    with pytest.raises(SpecError) as e:
        registry.register(model="m", artifact_uri=str(folder), labels={"Team": "x"}, copy=True)
    assert e.value.field == "labels.Team"
    with pytest.raises(SpecError) as e:
        registry.register(model="m", artifact_uri=str(tmp_path / "missing"), copy=True)
    assert e.value.field == "artifact_uri" and "does not exist" in str(e.value)
    assert registry.list() == [] and registry.tables.events("m") == []
    assert not (registry.home / "models" / "m").exists() or not any((registry.home / "models" / "m").iterdir())


def test_the_only_version_and_the_default_one_cannot_be_deleted(registry, folder):
    model = registry.register(model="m", artifact_uri=str(folder))
    with pytest.raises(ModelConflict) as e:
        model.delete_version(1)
    assert e.value.field == "version" and "only version" in str(e.value) and "gtc model delete m" in str(e.value)
    registry.register(model="m", artifact_uri=str(folder), alias="prod")
    with pytest.raises(ModelConflict, match="holds 'default'; move 'default'"):
        model.delete_version(1)
    model.delete_version(2)
    assert [v.version for v in model.versions] == [1]
    assert registry.register(model="m", artifact_uri=str(folder)).version == 3  # a number is never reused
    assert [e["event"] for e in model.events if e["event"].startswith("delete")] == ["delete_version"]


def test_an_unknown_model_or_version_says_what_there_is(registry, folder):
    registry.register(model="llama-tiny", artifact_uri=str(folder), alias="prod")
    with pytest.raises(ModelNotFound) as e:
        registry.get("lama-tiny")
    assert "did you mean 'llama-tiny'?" in str(e.value)
    with pytest.raises(ModelNotFound) as e:
        registry.get("llama-tiny@staging")
    assert "its versions: 1" in str(e.value) and "default, prod" in str(e.value)


def test_copy_puts_a_private_copy_in_gtc_home_and_delete_removes_it(registry, folder):
    model = registry.register(model="m", artifact_uri=str(folder), copy=True)
    copy = registry.home / "models" / "m" / "1"
    assert model.artifact_uri == str(copy) and model.record.copied
    assert (copy / "weights.bin").read_bytes() == (folder / "weights.bin").read_bytes()
    assert (copy / "tokenizer" / "vocab.json").read_text() == '{"a": 1}'
    for path in (registry.home / "models", registry.home / "models" / "m", copy):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    assert model.lineage["source"] == str(folder)
    registry.register(model="m", artifact_uri=str(folder), alias="prod")
    registry.merge_aliases(ModelRef("m", version=2), ["default"])
    model.delete_version(1)
    assert not copy.exists() and folder.exists()  # a referenced folder is never removed


def test_a_gcs_uri_is_kept_as_it_is(registry):
    model = registry.register(model="m", artifact_uri="gs://bucket/models/m", copy=True)
    assert model.artifact_uri == "gs://bucket/models/m" and not model.record.copied


def test_deleting_a_model_keeps_its_history(registry, folder):
    registry.register(model="m", artifact_uri=str(folder), copy=True)
    registry.delete(parse_ref("m"))
    assert registry.list() == [] and not (registry.home / "models" / "m" / "1").exists()
    assert [e["event"] for e in registry.tables.events("m")] == ["register", "alias", "delete_model"]


def test_an_older_state_db_gets_the_registry_when_opened(tmp_path):
    """A state.db as the previous schema (migrations 1-7) left it, with a cluster in it."""
    home = tmp_path / "old"
    home.mkdir(mode=0o700)
    db_path = home / "state.db"
    db = sqlite3.connect(db_path)
    folder = resources.files("jupyter_gtc.state") / "migrations"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql") and int(entry.name.split("_")[0]) <= 7:
            db.executescript(entry.read_text())
    db.execute("PRAGMA user_version = 7")
    db.execute("INSERT INTO clusters (name, backend, state, spec, created_at, updated_at) "
               "VALUES ('old', 'local', 'RUNNING', '{}', 1, 1)")
    db.commit()
    db.close()
    os.chmod(db_path, 0o600)

    store = open_store(home)
    assert store.schema_version >= 8
    assert [c.name for c in store.list_clusters()] == ["old"]
    record = ModelTables(store).register("m", artifact_uri="gs://b/m", lineage={}, user="u")
    assert (record.version, record.aliases) == (1, ["default"])
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    assert open_store(home).schema_version == store.schema_version  # a second open migrates nothing
