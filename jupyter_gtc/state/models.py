"""The model registry's tables (migration 0008): every read and change of models, versions,
aliases and their history, each change one transaction of the store's, so a refusal leaves
nothing half-made and two processes cannot both take one version number or one alias.

The rules (which alias is valid, what a reference means) are ``registry/rules.py``; here they
are applied to what the tables hold at the moment of the change.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ModelConflict, ModelNotFound, SpecError
from ..registry.rules import DEFAULT_ALIAS, ModelRef, check_alias, closest
from .store import Store


@dataclass
class ModelVersionRecord:
    model: str
    version: int
    aliases: list[str]
    description: str
    labels: dict[str, str]
    artifact_uri: str
    copied: bool
    lineage: dict[str, Any]
    deployment: dict[str, Any] | None
    created_at: float
    created_by: str


@dataclass
class ModelRecord:
    name: str
    description: str
    labels: dict[str, str]
    created_at: float
    created_by: str
    updated_at: float
    versions: list[ModelVersionRecord] = field(default_factory=list)


class PendingTaken(Exception):
    """A waiting registration was fulfilled by another process first (never reaches a user)."""


class ModelTables:
    def __init__(self, store: Store):
        self.store = store

    # -- reads -----------------------------------------------------------------------

    def list_models(self) -> list[ModelRecord]:
        """Every model with its versions, by name."""
        with self.store._connect() as db:
            return [self._model(db, row) for row in db.execute("SELECT * FROM models ORDER BY name")]

    def get_model(self, name: str) -> ModelRecord:
        with self.store._connect() as db:
            return self._model(db, self._model_row(db, name))

    def resolve(self, ref: ModelRef) -> ModelVersionRecord:
        """The version ``ref`` names: its number, its alias, or the one holding ``default``."""
        with self.store._connect() as db:
            return self._resolve(db, ref)

    def events(self, name: str, version: int | None = None) -> list[dict[str, Any]]:
        """The model's history, oldest first (time, user, event, version, detail); it outlives
        deleted versions and a deleted model of that name."""
        sql, args = "SELECT * FROM model_events WHERE model = ?", [name]
        if version is not None:
            sql, args = sql + " AND version = ?", [name, version]
        with self.store._connect() as db:
            rows = db.execute(sql + " ORDER BY id", args).fetchall()
        return [{"time": r["time"], "user": r["user"], "event": r["event"], "model": r["model"],
                 "version": r["version"], "detail": json.loads(r["detail"])} for r in rows]

    # -- changes ---------------------------------------------------------------------

    def register(self, name: str, *, artifact_uri: str, lineage: dict[str, Any], user: str,
                 description: str = "", labels: dict[str, str] | None = None, aliases: list[str] = (),
                 copied: bool = False, place: Callable[[int], str] | None = None,
                 pending: tuple[str, str] | None = None) -> ModelVersionRecord:
        """A new version of model ``name`` (the model made where it is new), numbered after the
        highest it ever had; the first version gets ``default``; each alias of ``aliases`` moves
        to it. ``place(version)`` runs inside the transaction and returns the artifact's final
        folder (a copy renamed into place): if it raises, nothing is recorded. ``pending``: the
        (cluster, job id) of the waiting registration this fulfils, taken in the same transaction
        (``PendingTaken`` where another process took it first)."""
        now = time.time()
        with self.store._connect() as db:
            if pending is not None and db.execute("DELETE FROM model_pending WHERE cluster = ? AND job_id = ?",
                                                  pending).rowcount != 1:
                raise PendingTaken(*pending)
            row = db.execute("SELECT * FROM models WHERE name = ?", (name,)).fetchone()
            if row is None:
                db.execute("INSERT INTO models (name, description, labels, created_at, created_by, updated_at)"
                           " VALUES (?, ?, ?, ?, ?, ?)", (name, description, json.dumps(labels or {}), now, user, now))
                version = 1
            else:
                version = row["next_version"]
                changes = {k: v for k, v in (("description", description), ("labels", labels)) if v}
                if changes:  # a later version's description and labels describe the model from now on
                    db.execute(f"UPDATE models SET {', '.join(f'{k} = ?' for k in changes)} WHERE name = ?",
                               (*[json.dumps(v) if k == "labels" else v for k, v in changes.items()], name))
            first = db.execute("SELECT 1 FROM model_versions WHERE model = ?", (name,)).fetchone() is None
            if place is not None:
                artifact_uri = place(version)
            db.execute("INSERT INTO model_versions (model, version, description, labels, artifact_uri, copied,"
                       " lineage, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (name, version, description, json.dumps(labels or {}), artifact_uri, int(copied),
                        json.dumps(lineage), now, user))
            db.execute("UPDATE models SET next_version = ?, updated_at = ? WHERE name = ?", (version + 1, now, name))
            self._event(db, name, version, user, "register", {"artifact_uri": artifact_uri, "copied": copied,
                                                             "job": lineage.get("job")})
            given = [a for a in aliases if not (first and a == DEFAULT_ALIAS)]  # the first has it anyway
            for alias in ([DEFAULT_ALIAS] if first else []) + given:
                self._move_alias(db, name, alias, version, user)
            return self._version(db, db.execute("SELECT * FROM model_versions WHERE model = ? AND version = ?",
                                                (name, version)).fetchone())

    def merge_aliases(self, ref: ModelRef, aliases: list[str], user: str) -> ModelVersionRecord:
        """Vertex's mergeVersionAliases: each ``alias`` moves to the version ``ref`` names, each
        ``-alias`` is removed from it. All or none: a refusal of one changes nothing."""
        with self.store._connect() as db:
            target = self._resolve(db, ref)
            for entry in aliases:
                if isinstance(entry, str) and entry.startswith("-"):
                    alias = check_alias(entry[1:], "aliases")
                    if alias == DEFAULT_ALIAS:
                        raise SpecError("aliases", entry, f"'{DEFAULT_ALIAS}' cannot be removed, only moved: give it "
                                                          f"to another version (set_alias('{DEFAULT_ALIAS}', "
                                                          f"version=N), `gtc model alias {ref.name}@N default`)")
                    held = self._holder(db, ref.name, alias)
                    if held != target.version:
                        where = f"version {held} holds it" if held is not None else "no version holds it"
                        raise SpecError("aliases", entry, f"version {target.version} of {ref.name} has no alias "
                                                          f"{alias!r} ({where}); its aliases: "
                                                          f"{', '.join(target.aliases) or 'none'}")
                    db.execute("DELETE FROM model_aliases WHERE model = ? AND alias = ?", (ref.name, alias))
                    self._event(db, ref.name, target.version, user, "unalias", {"alias": alias})
                else:
                    self._move_alias(db, ref.name, check_alias(entry, "aliases"), target.version, user)
            return self._resolve(db, ModelRef(ref.name, version=target.version))

    def delete_version(self, ref: ModelRef, user: str) -> ModelVersionRecord:
        """Forget one version (its number is not reused). Refused for a model's only version
        (delete the model), the version holding ``default`` (move it first) and a deployed one."""
        with self.store._connect() as db:
            target = self._resolve(db, ref)
            count = db.execute("SELECT COUNT(*) FROM model_versions WHERE model = ?", (ref.name,)).fetchone()[0]
            what = f"{ref.name}@{target.version}"
            if count == 1:
                raise ModelConflict("version", what, f"it is the only version of {ref.name}; delete the model "
                                                     f"instead (`gtc model delete {ref.name}`, gtc.models.delete)")
            if DEFAULT_ALIAS in target.aliases:
                raise ModelConflict("version", what, f"it holds '{DEFAULT_ALIAS}'; move '{DEFAULT_ALIAS}' to another "
                                                     f"version first (`gtc model alias {ref.name}@N default`)")
            if target.deployment:
                raise ModelConflict("version", what, "it is deployed; undeploy it first")
            db.execute("DELETE FROM model_aliases WHERE model = ? AND version = ?", (ref.name, target.version))
            db.execute("DELETE FROM model_versions WHERE model = ? AND version = ?", (ref.name, target.version))
            self._event(db, ref.name, target.version, user, "delete_version",
                        {"aliases": target.aliases, "artifact_uri": target.artifact_uri})
            return target

    def set_deployment(self, ref: ModelRef, deployment: dict[str, Any] | None, user: str) -> ModelVersionRecord:
        """Record that a version is deployed (``deployment``: its endpoint), or no longer is (None),
        with a ``deploy`` / ``undeploy`` row of its history; a version is deployed once at a time."""
        with self.store._connect() as db:
            target = self._resolve(db, ref)
            what = f"{ref.name}@{target.version}"
            if deployment is not None and target.deployment:
                raise ModelConflict("version", what, f"it is deployed already (endpoint "
                                                     f"{target.deployment.get('endpoint')}); undeploy it first")
            db.execute("UPDATE model_versions SET deployment = ? WHERE model = ? AND version = ?",
                       (None if deployment is None else json.dumps(deployment), ref.name, target.version))
            if deployment is not None:
                detail = {k: deployment.get(k) for k in ("endpoint", "cluster", "min_replicas", "max_replicas")}
                self._event(db, ref.name, target.version, user, "deploy", detail)
            elif target.deployment:
                self._event(db, ref.name, target.version, user, "undeploy",
                            {"endpoint": target.deployment.get("endpoint")})
            return self._resolve(db, ModelRef(ref.name, version=target.version))

    def update_deployment(self, ref: ModelRef, endpoint: str, changes: dict[str, Any]) -> None:
        """Change fields of a version's deployment (its replicas, as one is replaced) while it is
        still ``endpoint``'s; nothing where it was undeployed meanwhile."""
        with self.store._connect() as db:
            target = self._resolve(db, ref)
            if target.deployment and target.deployment.get("endpoint") == endpoint:
                db.execute("UPDATE model_versions SET deployment = ? WHERE model = ? AND version = ?",
                           (json.dumps({**target.deployment, **changes}), ref.name, target.version))

    def deployed(self) -> list[ModelVersionRecord]:
        """Every deployed version, by model and version."""
        with self.store._connect() as db:
            rows = db.execute("SELECT * FROM model_versions WHERE deployment IS NOT NULL "
                              "ORDER BY model, version").fetchall()
            return [self._version(db, row) for row in rows]

    def delete_model(self, name: str, user: str) -> ModelRecord:
        """Forget a model and every version (refused while one is deployed); its history stays."""
        with self.store._connect() as db:
            record = self._model(db, self._model_row(db, name))
            deployed = [v.version for v in record.versions if v.deployment]
            if deployed:
                raise ModelConflict("model", name, f"version(s) {deployed} are deployed; undeploy them first")
            for table in ("model_aliases", "model_versions"):
                db.execute(f"DELETE FROM {table} WHERE model = ?", (name,))
            db.execute("DELETE FROM models WHERE name = ?", (name,))
            self._event(db, name, None, user, "delete_model", {"versions": [v.version for v in record.versions]})
            return record

    # -- registrations that wait for their job ----------------------------------------

    def add_pending(self, cluster: str, job_id: str, model: str, request: dict[str, Any]) -> None:
        with self.store._connect() as db:
            db.execute("INSERT OR REPLACE INTO model_pending (cluster, job_id, model, request, created_at)"
                       " VALUES (?, ?, ?, ?, ?)", (cluster, job_id, model, json.dumps(request), time.time()))

    def pending(self) -> list[dict[str, Any]]:
        with self.store._connect() as db:
            rows = db.execute("SELECT * FROM model_pending ORDER BY created_at").fetchall()
        return [{"cluster": r["cluster"], "job_id": r["job_id"], "model": r["model"],
                 "request": json.loads(r["request"])} for r in rows]

    def settle_pending(self, cluster: str, job_id: str, model: str, user: str, reason: str) -> None:
        """A waiting registration that will not happen: gone, with a ``not_registered`` row
        saying why (once, whichever process gets here first)."""
        with self.store._connect() as db:
            if db.execute("DELETE FROM model_pending WHERE cluster = ? AND job_id = ?",
                          (cluster, job_id)).rowcount == 1:
                self._event(db, model, None, user, "not_registered", {"cluster": cluster, "job": job_id,
                                                                      "reason": reason})

    # -- inside a transaction ----------------------------------------------------------

    def _model_row(self, db: sqlite3.Connection, name: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM models WHERE name = ?", (name,)).fetchone()
        if row is None:
            known = [r[0] for r in db.execute("SELECT name FROM models ORDER BY name")]
            raise ModelNotFound(name, f"no model named {name!r}; {closest(name, known)}")
        return row

    def _resolve(self, db: sqlite3.Connection, ref: ModelRef) -> ModelVersionRecord:
        self._model_row(db, ref.name)
        if ref.version is not None:
            row = db.execute("SELECT * FROM model_versions WHERE model = ? AND version = ?",
                             (ref.name, ref.version)).fetchone()
        else:
            alias = ref.alias or DEFAULT_ALIAS
            row = db.execute("SELECT v.* FROM model_versions v JOIN model_aliases a ON a.model = v.model AND "
                             "a.version = v.version WHERE a.model = ? AND a.alias = ?", (ref.name, alias)).fetchone()
        if row is None:
            versions = [str(r[0]) for r in db.execute("SELECT version FROM model_versions WHERE model = ? "
                                                      "ORDER BY version", (ref.name,))]
            aliases = [r[0] for r in db.execute("SELECT alias FROM model_aliases WHERE model = ? ORDER BY alias",
                                                (ref.name,))]
            raise ModelNotFound(str(ref), f"model {ref.name} has no version {str(ref).partition('@')[2]!r}; its "
                                          f"versions: {', '.join(versions)}; its aliases: {', '.join(aliases)}")
        return self._version(db, row)

    def _holder(self, db: sqlite3.Connection, name: str, alias: str) -> int | None:
        row = db.execute("SELECT version FROM model_aliases WHERE model = ? AND alias = ?", (name, alias)).fetchone()
        return None if row is None else row[0]

    def _move_alias(self, db: sqlite3.Connection, name: str, alias: str, version: int, user: str) -> None:
        held = self._holder(db, name, alias)
        if held == version:
            return
        db.execute("INSERT INTO model_aliases (model, alias, version) VALUES (?, ?, ?) ON CONFLICT (model, alias)"
                   " DO UPDATE SET version = excluded.version", (name, alias, version))
        self._event(db, name, version, user, "alias", {"alias": alias, "from": held, "to": version})

    def _event(self, db: sqlite3.Connection, name: str, version: int | None, user: str, event: str,
               detail: dict[str, Any]) -> None:
        db.execute("INSERT INTO model_events (model, version, time, user, event, detail) VALUES (?, ?, ?, ?, ?, ?)",
                   (name, version, time.time(), user, event, json.dumps(detail)))

    def _version(self, db: sqlite3.Connection, row: sqlite3.Row) -> ModelVersionRecord:
        aliases = [r[0] for r in db.execute("SELECT alias FROM model_aliases WHERE model = ? AND version = ? "
                                            "ORDER BY alias = 'default' DESC, alias", (row["model"], row["version"]))]
        return ModelVersionRecord(
            model=row["model"], version=row["version"], aliases=aliases, description=row["description"],
            labels=json.loads(row["labels"]), artifact_uri=row["artifact_uri"], copied=bool(row["copied"]),
            lineage=json.loads(row["lineage"]), deployment=json.loads(row["deployment"] or "null"),
            created_at=row["created_at"], created_by=row["created_by"])

    def _model(self, db: sqlite3.Connection, row: sqlite3.Row) -> ModelRecord:
        versions = [self._version(db, v) for v in db.execute(
            "SELECT * FROM model_versions WHERE model = ? ORDER BY version", (row["name"],))]
        return ModelRecord(name=row["name"], description=row["description"], labels=json.loads(row["labels"]),
                           created_at=row["created_at"], created_by=row["created_by"], updated_at=row["updated_at"],
                           versions=versions)
