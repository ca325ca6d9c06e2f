"""The model registry: a job's model registered under a name, in versions numbered from 1,
with aliases (``default``, ``prod``, ...), a description, labels, its artifact folder and its
lineage (``model_lineage.py``). ``Model`` is a handle on one version, backed by the state
store (``state/models.py``), so any process finds it again.

The artifact folder is referenced where it is (a job's ``AIP_MODEL_DIR`` on the cluster's
host, a folder here, a ``gs://`` URI), or with ``copy=True`` copied through the cluster's host
into ``$GTC_HOME/models/<name>/<version>/`` (0700): then it outlives the job's folder and the
cluster. Serving (a later increment) records a version's deployment in ``deployment`` and its
deploys and undeploys in the same history.
"""

from __future__ import annotations

import getpass
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..exceptions import CommandError, GtcError, SpecError
from ..hosts import LOCAL, Host
from ..registry.rules import (DEFAULT_ALIAS, ModelRef, check_alias, check_description, check_labels,
                            check_model_name, parse_ref)
from ..state import Store
from ..state.models import ModelRecord, ModelTables, ModelVersionRecord, PendingTaken
from .jobs import Job, JobService
from .model_lineage import job_lineage, trial_of

COPY_CHUNK = 8 * 1024 * 1024  # bytes read from the host per request while copying


class Model:
    """One version of a registered model (``gtc.models.get("name@prod")``). Its fields are read
    from the store each time, so the handle follows changes other processes make."""

    def __init__(self, service: "ModelService", name: str, version: int):
        self._service = service
        self.name = name
        self.version = version

    @property
    def record(self) -> ModelVersionRecord:
        return self._service.tables.resolve(ModelRef(self.name, version=self.version))

    aliases = property(lambda self: self.record.aliases)
    description = property(lambda self: self.record.description)
    labels = property(lambda self: self.record.labels)
    artifact_uri = property(lambda self: self.record.artifact_uri, doc="Its folder (or gs:// URI).")
    lineage = property(lambda self: self.record.lineage,
                       doc="What trained it: job, script, options, trial and its params, metrics, checkpoint, parent.")
    deployment = property(lambda self: self.record.deployment)

    @property
    def versions(self) -> list[ModelVersionRecord]:
        """Every version of the model, oldest first, each with its aliases."""
        return self._service.tables.get_model(self.name).versions

    @property
    def events(self) -> list[dict[str, Any]]:
        """The model's history, oldest first: every register, alias move and delete, with time and user."""
        return self._service.tables.events(self.name)

    def set_alias(self, alias: str, version: int | None = None) -> "Model":
        """Give ``alias`` to ``version`` (default: this handle's), moving it from the version that
        held it; ``-alias`` removes it. ``default`` moves, and cannot be removed."""
        self._service.merge_aliases(ModelRef(self.name, version=version or self.version), [alias])
        return self

    def delete_version(self, version: int) -> "Model":
        self._service.delete(ModelRef(self.name, version=version))
        return self

    def deploy(self, cluster: str, *, min_replicas: int = 1, max_replicas: int | None = None, **options: Any):
        """Serve this version as an endpoint: each replica a Slurm job of ``cluster`` running a
        server under Vertex's serving contract (``services/endpoints.py`` says what ``options``
        take); returns the ``Endpoint`` once a replica answers."""
        return self._service.endpoints.deploy(self, cluster, min_replicas=min_replicas, max_replicas=max_replicas,
                                              **options)

    def undeploy(self) -> None:
        """End this version's endpoint: its front, its replicas' jobs; the registry records it."""
        deployment = self.deployment
        if not deployment:
            raise SpecError("model", f"{self.name}@{self.version}", "it is not deployed (gtc endpoint list)")
        self._service.endpoints.undeploy(deployment["endpoint"])

    def export_to_vertex(self, target: str | None = None, *, display_name: str | None = None,
                         serving_container_image_uri: str | None = None, is_default_version: bool = True):
        """Upload this version to Vertex AI's Model Registry through Vertex target ``target``
        (the only one attached when None; a local endpoint's too): its files to the target's
        staging bucket, then ``Model.upload``, as a new version of the Vertex model named
        ``display_name`` (this model's name) where there is one. Its aliases go with it
        (``default`` where ``is_default_version``). Returns ``Exported`` (resource name, version)."""
        from .model_export import export_to_vertex  # the Google Cloud libraries, when exporting

        return export_to_vertex(self, target, display_name, serving_container_image_uri, is_default_version)

    def to_json(self, whole: bool = True) -> dict[str, Any]:
        """What the REST routes and ``gtc model show --json`` send."""
        model = self._service.tables.get_model(self.name)
        data = {"name": self.name, "version": self.version, "description": model.description,
                "labels": model.labels, "created_at": model.created_at, "created_by": model.created_by,
                "versions": [version_json(v) for v in model.versions]}
        if whole:
            data["events"] = self.events
        return data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Model) and (other.name, other.version) == (self.name, self.version)

    def __hash__(self) -> int:
        return hash((self.name, self.version))

    def __repr__(self) -> str:
        aliases = self.aliases
        return f"<Model {self.name}@{self.version}" + (f" ({', '.join(aliases)})" if aliases else "") + ">"


def version_json(v: ModelVersionRecord) -> dict[str, Any]:
    return {"version": v.version, "aliases": v.aliases, "description": v.description, "labels": v.labels,
            "artifact_uri": v.artifact_uri, "copied": v.copied, "lineage": v.lineage, "deployment": v.deployment,
            "created_at": v.created_at, "created_by": v.created_by}


class ModelService:
    def __init__(self, store: Store, jobs: JobService, home: Path, study_snapshot=None):
        self.tables = ModelTables(store)
        self.store = store
        self.jobs = jobs
        self.home = home
        self._study_snapshot = study_snapshot  # TuningService.snapshot: a trial's parameters for lineage
        self.endpoints = None  # services/endpoints.EndpointService, given by api (serving)

    def get(self, ref: str) -> Model:
        self.settle_pending()
        record = self.tables.resolve(parse_ref(ref))
        return Model(self, record.model, record.version)

    def list(self) -> list[ModelRecord]:
        self.settle_pending()
        return self.tables.list_models()

    # -- registrations that wait for their job (a recipe's) ------------------------------

    def register_when_done(self, job: Job, model: str, **request: Any) -> None:
        """Register ``job``'s model as ``model`` once the job has COMPLETED (``register``'s
        arguments in ``request``). Recorded in the store and done by the first read of the
        registry after the job ended, in whichever process (a notebook's ``gtc.models.get``,
        ``gtc model list``, the sidebar's), so it happens whether or not this process lives on."""
        check_model_name(model, "register")
        self.tables.add_pending(job.cluster, job.id, model, request)

    def settle_pending(self) -> None:
        """Register what waited for a job that has ended; a job that failed, or left no model, is
        a ``not_registered`` row of the model's history, saying why."""
        for row in self.tables.pending():
            cluster, job_id, model = row["cluster"], row["job_id"], row["model"]
            try:
                job = self.jobs.get(job_id, cluster)
                if not job.finished:
                    continue
                self.register(job, model=model, cluster=cluster, pending=(cluster, job_id), **row["request"])
            except PendingTaken:
                pass  # another process registered it meanwhile
            except CommandError:
                continue  # the cluster's host did not answer (a login node): the next read tries again
            except GtcError as e:  # the job failed or left no model, or it (or its cluster) is gone
                self.tables.settle_pending(cluster, job_id, model, _user(), str(e))

    def register(self, job: Job | str | None = None, *, model: str, alias: str | list[str] | None = None,
                 description: str | None = None, labels: dict[str, str] | None = None, copy: bool = False,
                 artifact_uri: str | None = None, parent: str | None = None, cluster: str | None = None,
                 origin: dict[str, Any] | None = None, pending: tuple[str, str] | None = None) -> Model:
        """``origin``: what else made the model, kept in its lineage (a recipe's name and config)."""
        # Every argument is checked before a file is copied or a row written.
        name = check_model_name(model, "model")
        aliases = [check_alias(a, "alias") for a in ([alias] if isinstance(alias, str) else alias or [])]
        description = check_description(description)
        labels = check_labels(labels)
        parent_ref = self._resolve(parent, "parent") if parent else None
        if job is not None and not isinstance(job, Job):
            job = self.jobs.get(str(job), cluster)
        host: Host = LOCAL
        if job is not None:
            if not job.managed and not artifact_uri:
                raise SpecError("job", job.id, f"job {job.id} was not submitted through jupyter_gtc, so it has no "
                                               "AIP_MODEL_DIR; give artifact_uri= the folder its model is in")
            _check_finished(job)
            host = job.host
            source = artifact_uri or str(job.model_dir)
        elif artifact_uri:
            source = artifact_uri
        else:
            raise SpecError("job", None, "give the job whose model to register (a Job, its id or name), or "
                                         "artifact_uri= a model folder or gs:// URI")
        remote = source.startswith("gs://")
        if not remote:
            _check_folder(host, source, job)
        lineage: dict[str, Any] = {}
        if job is not None:
            lineage = job_lineage(job, self.store, self._trial_of)
        lineage["parent"] = f"{parent_ref.name}@{parent_ref.version}" if parent_ref else None
        lineage["origin"] = origin
        lineage["source"] = source
        user = _user()
        if not copy or remote:  # a gs:// URI is kept as is: Cloud Storage outlives the job already
            record = self.tables.register(name, artifact_uri=source, lineage=lineage, user=user,
                                          description=description, labels=labels, aliases=aliases, pending=pending)
            return Model(self, name, record.version)
        owner = job.user if job is not None else None  # a folder the caller names is theirs to read
        return self._register_copy(name, host, owner, source, lineage, user, description, labels, aliases, pending)

    def _register_copy(self, name, host, owner, source, lineage, user, description, labels, aliases,
                       pending) -> Model:
        folder = self.home / "models" / name
        _private_dirs(folder)
        incoming = folder / f".incoming-{uuid.uuid4().hex[:12]}"
        placed: list[Path] = []

        def place(version: int) -> str:
            # Inside the registry's transaction: a rename, quick, and undone if the commit fails.
            final = folder / str(version)
            if final.exists():  # a folder left by a model of this name that was deleted
                shutil.rmtree(final)
            os.rename(incoming, final)
            placed.append(final)
            return str(final)

        try:
            copy_tree(host, source, incoming, owner)
            record = self.tables.register(name, artifact_uri=str(incoming), lineage=lineage, user=user,
                                          description=description, labels=labels, aliases=aliases, copied=True,
                                          place=place, pending=pending)
        except BaseException:
            for path in (incoming, *placed):
                shutil.rmtree(path, ignore_errors=True)
            raise
        return Model(self, name, record.version)

    def _resolve(self, ref: str, field: str) -> Model:
        record = self.tables.resolve(parse_ref(ref, field))
        return Model(self, record.model, record.version)

    def merge_aliases(self, ref: ModelRef, aliases: list[str]) -> ModelVersionRecord:
        if not aliases:
            raise SpecError("aliases", aliases, "give at least one alias to apply ('prod') or remove ('-prod')")
        return self.tables.merge_aliases(ref, list(aliases), _user())

    def delete(self, ref: ModelRef) -> None:
        """A version (``ref`` with a number or alias), else the whole model; a copied artifact
        folder goes with it."""
        if ref.version is None and ref.alias is None:
            record = self.tables.delete_model(ref.name, _user())
            removed = [v for v in record.versions if v.copied]
        else:
            removed = [v for v in [self.tables.delete_version(ref, _user())] if v.copied]
        ours = (self.home / "models").resolve()
        for version in removed:  # only a copy of ours, whatever a row says
            if ours in Path(version.artifact_uri).resolve().parents:
                shutil.rmtree(version.artifact_uri, ignore_errors=True)

    def _trial_of(self, job: Job) -> dict[str, Any] | None:
        if self._study_snapshot is None:
            return None
        return trial_of(job, self.store, self._study_snapshot)


def copy_tree(host: Host, source: str, target: Path, owner: str | None = None) -> None:
    """``source`` on ``host`` copied into ``target`` (made 0700), by ranges of the host's reads:
    the same way a job's log comes from a login node. With ``owner`` (the job's user) only files
    that user owns are read: a job chooses what its model folder holds, links included, and must
    not reach through ours a file its user could not read. Links to folders are not followed."""
    target.mkdir(mode=0o700)
    for entry in host.list_dir(source) or []:
        src, dst = f"{source.rstrip('/')}/{entry.name}", target / entry.name
        if entry.is_dir:
            copy_tree(host, src, dst, owner)
        elif entry.is_file:
            with open(dst, "wb") as out:
                offset = 0
                while True:
                    try:
                        chunk = host.read(src, offset, COPY_CHUNK, owner=owner)
                    except PermissionError as e:
                        raise SpecError("artifact_uri", src, f"it is not copied ({e.strerror}): a model folder is "
                                                             f"copied only from files its job's user owns") from None
                    out.write(chunk)
                    offset += len(chunk)
                    if len(chunk) < COPY_CHUNK:
                        break


def _private_dirs(folder: Path) -> None:
    for path in (folder.parent, folder):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass


def _check_finished(job: Job) -> None:
    if not job.finished:
        raise SpecError("job", job.id, f"job {job.id} ({job.name}) is {job.state}; register its model once it "
                                       f"has finished (job.wait(), `gtc job logs -f {job.id}`)")
    if job.state != "COMPLETED":
        raise SpecError("job", job.id, f"job {job.id} ({job.name}) ended {job.state}, so its model may be "
                                       f"unfinished; register a COMPLETED job's, or name the folder yourself "
                                       f"with artifact_uri=")


def _check_folder(host: Host, source: str, job: Job | None) -> None:
    found = host.stat(source)
    if found is None or not found.is_dir or not host.list_dir(source):
        what = "does not exist" if found is None else "is not a folder" if not found.is_dir else "is empty"
        hint = (f"job {job.id} left no model in its AIP_MODEL_DIR: save it there (model.save_pretrained("
                f"os.environ['AIP_MODEL_DIR'])), or give artifact_uri= the folder it is in" if job is not None
                else "give the folder the model was saved in, or a gs:// URI")
        raise SpecError("artifact_uri", source, f"the folder {what}; {hint}")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's user)
        return str(os.getuid())
