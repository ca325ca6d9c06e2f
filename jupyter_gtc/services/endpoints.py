"""Serving: a registered model version deployed as an endpoint (issue 27, first increment).

Each replica is a Slurm job of the cluster that runs a server under Vertex's serving container
contract (``serving/contract.py``): ours for causal LMs (``serving/lm_server.py``) or the user's
own ``command``, started by ``serving/replica.py`` with a clean environment. In front of them one
address per endpoint (``serving/front.py``), a thread of the process that deployed it.

The registry records the deployment in the version's ``deployment`` column, with ``deploy`` and
``undeploy`` rows of its history; a deployed version cannot be deleted (``state/models.py``).
Nothing is half-made: a replica job that fails to submit or to start, or a row that cannot be
written, undoes what was done before it.

Where replicas run: a local cluster with the host network (a replica binds loopback, which only
this machine reaches), or one of network namespaces, or an attached ``slurm`` cluster
(``endpoint_sites.py``: a replica binds its node's addresses on a port it picks, and the front reaches it through the cluster's host, over
SSH by a forwarded loopback port). Replicas scale between ``min_replicas`` and ``max_replicas`` (the rule: at
``SCALE_UP_LOAD``); a replica whose job ends after it served is replaced. A user's own server binds where it chooses: give it
``GTC_SERVING_HOST`` as its address (Vertex's containers bind 0.0.0.0, which another user of
this machine could reach; ours binds loopback and asks for the token).
"""

from __future__ import annotations

import getpass
import http.client
import json
import os
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .._ports import free_ports
from ..exceptions import EndpointNotFound, GtcError, JobTimeout, PredictionError, SpecError
from ..registry.rules import ModelRef
from ..serving import contract
from ..serving.front import MAX_OUTSTANDING, Front, Replica
from ..state.models import ModelTables, ModelVersionRecord
from . import endpoint_sites
from ..backends import get_backend
from ..backends.vertex_training import is_training_runtime

# Scaling between min_replicas and max_replicas. Vertex scales on 60% utilisation; here a replica's
# utilisation is its outstanding requests over the most it holds (front.MAX_OUTSTANDING): a replica
# is added when every check of a window (SCALE_UP_CHECKS checks, 2 s apart) saw 60% or more, and one
# idle replica is removed when no request was outstanding for SCALE_DOWN_IDLE seconds.
SCALE_UP_LOAD = 0.6 * MAX_OUTSTANDING
SCALE_UP_CHECKS = 3
SCALE_DOWN_IDLE = 60.0
READY_TIMEOUT = 300.0  # s deploy() waits for a replica to answer its health check
PREDICT_TIMEOUT = 330.0  # s a prediction may take through the front (its own limit is 300)
REPLICA_SCRIPT = '#!/bin/bash\nexec python -m jupyter_gtc.serving.replica "$1"\n'


class Endpoint:
    """A deployed model version: ``ep.predict(instances=[...])``, ``ep.undeploy()``. Backed by the
    registry's row, so any process of the user finds it (``gtc.endpoints.get(ID)``)."""

    def __init__(self, service: "EndpointService", endpoint_id: str):
        self._service = service
        self.id = endpoint_id

    @property
    def record(self) -> ModelVersionRecord:
        return self._service.find(self.id)

    @property
    def deployment(self) -> dict[str, Any]:
        return self.record.deployment or {}

    model = property(lambda self: f"{self.record.model}@{self.record.version}")
    cluster = property(lambda self: self.deployment["cluster"])

    @property
    def url(self) -> str:
        front = self.deployment["front"]
        return f"http://{front['host']}:{front['port']}/v1/endpoints/{self.id}:predict"

    @property
    def replicas(self) -> list[dict[str, Any]]:
        """Each replica: its job, address, and (in the process serving the front) health and load."""
        front = self._service.fronts.get(self.id)
        return front.snapshot() if front else [dict(r) for r in self.deployment["replicas"]]

    def predict(self, instances: list[Any], timeout: float = PREDICT_TIMEOUT) -> list[Any]:
        """The predictions for ``instances`` (``[{"prompt": "...", "max_tokens": 16}]`` for our
        LM server), through the endpoint's address as any client's; a refusal raises
        ``PredictionError`` with its HTTP status (400 with the reason, 429 not ready or full)."""
        return self._service.predict(self.id, instances, timeout)

    def requests(self) -> list[dict[str, Any]]:
        """Every request the front answered: time, status, seconds, replica (``requests.jsonl``)."""
        path = Path(self.deployment["folder"]) / "requests.jsonl"
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.endswith("}")]

    @property
    def metrics_feed(self):
        """This process's one ``EndpointMetrics`` of the endpoint: its requests as a point a second."""
        return self._service.metrics_feed(self.id)

    def plot(self):
        """A live plot of requests/s, p50/p95 latency, errors/s and replicas, a point a second.
        Drawn by the notebook front end: ``%load_ext jupyter_gtc`` first."""
        if self._service.plotter is None:
            raise GtcError("ep.plot() draws in a notebook: run `%load_ext jupyter_gtc` first")
        return self._service.plotter(self)

    def undeploy(self) -> None:
        self._service.undeploy(self.id)

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        return {"id": self.id, "model": self.model, "cluster": d["cluster"], "url": self.url,
                "min_replicas": d["min_replicas"], "max_replicas": d["max_replicas"], "replicas": self.replicas,
                "deployed_at": d["deployed_at"], "deployed_by": d["deployed_by"], "served_by_pid": d["front"]["pid"]}

    def __repr__(self) -> str:
        return f"<Endpoint {self.id} {self.model} on {self.cluster}>"


class EndpointService:
    def __init__(self, store, clusters, jobs, home: Path):
        self.tables = ModelTables(store)
        self.clusters, self.jobs, self.home = clusters, jobs, home
        self.fronts: dict[str, Front] = {}  # the endpoints this process serves
        self._addresses: dict[str, dict[str, Any]] = {}  # endpoint -> its front's address, once read
        self._local = threading.local()  # each thread's kept-alive connections to fronts
        self._feeds: dict[str, Any] = {}  # endpoint -> its EndpointMetrics in this process
        self._feeds_lock = threading.Lock()
        self.failures: dict[str, str] = {}  # endpoint -> why a settle=True deploy was undeployed
        self._sites: dict[str, endpoint_sites.RemoteSite] = {}  # endpoint -> where its replicas run, if remote
        self.plotter = None  # how ep.plot() draws: the widgets', given through api (services import none)

    # -- reading --------------------------------------------------------------------------

    def find(self, endpoint_id: str) -> ModelVersionRecord:
        for record in self.tables.deployed():
            if record.deployment.get("endpoint") == endpoint_id:
                return record
        known = [r.deployment.get("endpoint") for r in self.tables.deployed()]
        raise EndpointNotFound(f"no endpoint {endpoint_id!r}; deployed: {', '.join(map(str, known)) or 'none'} "
                               f"(gtc endpoint list)")

    def get(self, endpoint_id: str) -> Endpoint:
        self.find(str(endpoint_id))
        return Endpoint(self, str(endpoint_id))

    def list(self) -> list[Endpoint]:
        return [Endpoint(self, r.deployment["endpoint"]) for r in self.tables.deployed()]

    def metrics_feed(self, endpoint_id: str):
        from .endpoint_metrics import EndpointMetrics

        with self._feeds_lock:
            feed = self._feeds.get(endpoint_id)
            if feed is None:
                deployment = self.find(endpoint_id).deployment
                endpoint = Endpoint(self, endpoint_id)
                feed = self._feeds[endpoint_id] = EndpointMetrics(
                    endpoint_id, Path(deployment["folder"]) / "requests.jsonl", deployment["deployed_at"],
                    replicas=lambda: _count(lambda: endpoint.replicas),
                    deployed=lambda: _count(lambda: [endpoint.record]) > 0)
            return feed

    # -- deploying --------------------------------------------------------------------------

    def deploy(self, model, cluster: str, *, min_replicas: int = 1, max_replicas: int | None = None,
               command: list[str] | None = None, options: list[str] | None = None, wait: bool = True,
               timeout: float = READY_TIMEOUT, settle: bool = False) -> Endpoint:
        """``model`` (a registry ``Model``) served by ``min_replicas`` Slurm jobs of ``cluster``;
        ``command``: a user's own server (argv, Vertex's contract) instead of ours; ``options``:
        sbatch's for each replica (``--gpus=1``). Waits until a replica answers its health check
        (``wait=False``: returns at once; the endpoint answers 429 until then; with ``settle``, a thread
        waits as deploy() would and undeploys it where no replica answers, saying why in
        ``failures`` and this process's log: a REST route's answer that cannot wait)."""
        max_replicas = min_replicas if max_replicas is None else max_replicas
        _check_replicas(min_replicas, max_replicas)
        if command is not None and (not isinstance(command, list) or not command
                                    or not all(isinstance(c, str) and c for c in command)):
            raise SpecError("command", command, "a server's argv as a list of strings, e.g. ['python', 'serve.py']")
        record = model.record
        if record.deployment:
            raise SpecError("model", f"{record.model}@{record.version}", f"it is deployed already as endpoint "
                                                                         f"{record.deployment['endpoint']}; "
                                                                         f"undeploy it first")
        remote = self._check_cluster(cluster)
        endpoint_id = str(secrets.randbelow(9 * 10 ** 17) + 10 ** 17)  # Vertex's ids are numbers
        deployed_model_id = str(secrets.randbelow(9 * 10 ** 17) + 10 ** 17)
        folder = _private_dir(self.home / "endpoints", endpoint_id)
        jobs: list = []
        front: Front | None = None
        site = None
        try:
            token = secrets.token_urlsafe(32)
            if remote:
                site = self._open_site(cluster, endpoint_id, record.artifact_uri)
                token_file = site.write("replica.token", token)
            else:
                token_file = str(_private_file(folder / "replica.token", token))
            health, predict = contract.routes(endpoint_id, deployed_model_id)
            launch = _Launch(cluster, folder, record.artifact_uri, record.model, endpoint_id, deployed_model_id,
                             command, list(options or []), token_file, site)
            replicas = []
            for _ in range(min_replicas):
                job, replica = self._start_replica(launch)
                jobs.append(job)
                replicas.append(replica)
            ref = ModelRef(record.model, version=record.version)
            front = Front(endpoint_id, replicas, token, health, predict, folder / "requests.jsonl",
                          still_deployed=lambda: self._still_deployed(ref, endpoint_id),
                          maintain=lambda f: self._maintain(f, launch, ref, min_replicas, max_replicas))
            host, port = front.address
            deployment = {"endpoint": endpoint_id, "deployed_model_id": deployed_model_id, "cluster": cluster,
                          "min_replicas": min_replicas, "max_replicas": max_replicas, "command": command,
                          "replicas": _replica_rows(replicas, site),
                          "site_folder": str(site.folder) if site else None,
                          "front": {"host": host, "port": port, "pid": os.getpid()}, "folder": str(folder),
                          "deployed_at": time.time(), "deployed_by": _user()}
            self.tables.set_deployment(ref, deployment, _user())
            if site is not None:
                self._sites[endpoint_id] = site
            self.fronts[endpoint_id] = front.start()
        except BaseException:
            if front is not None:
                front.server_close()
            self._end_jobs(jobs)
            shutil.rmtree(folder, ignore_errors=True)
            if site is not None:
                site.remove()
            raise
        endpoint = Endpoint(self, endpoint_id)
        if not wait and settle:
            threading.Thread(target=self._settle, args=(endpoint_id, jobs, timeout), daemon=True,
                             name=f"endpoint-{endpoint_id}-deploy").start()
        if wait:
            try:
                self._wait_ready(endpoint_id, jobs, timeout)
            except BaseException:
                self.undeploy(endpoint_id)
                raise
        return endpoint

    def _start_replica(self, launch: "_Launch") -> tuple[Any, Replica]:
        """One replica's job: its spec file (0600: the contract's variables, the command), then sbatch."""
        index = launch.started
        launch.started += 1
        site = launch.site
        port = free_ports(1, "127.0.0.1")[0] if site is None else 0  # 0: the replica picks one on its node
        env = contract.container_env(port=port, storage_uri=launch.storage_uri, endpoint_id=launch.endpoint_id,
                                     deployed_model_id=launch.deployed_model_id, model_name=launch.model,
                                     bind="127.0.0.1" if site is None else "0.0.0.0", token_file=launch.token_file)
        if site is None:
            spec = str(_private_file(launch.folder / f"replica-{index}.json",
                                     json.dumps({"command": launch.command, "env": env})))
        else:
            spec = site.write(f"replica-{index}.json", json.dumps({
                "command": launch.command, "env": env, "address_file": str(site.folder / f"replica-{index}.address")}))
        job = self.jobs.submit(launch.cluster, REPLICA_SCRIPT, [f"--job-name=serve-{launch.model}", "--nodes=1",
                                                                "--ntasks=1", *launch.options],
                               script_args=[spec], submit_dir=str(launch.folder if site is None else site.folder))
        if site is None:
            return job, Replica(job.id, "127.0.0.1", port)
        return job, Replica(job.id, "", 0, locate=lambda: site.locate(job.id, index))

    def _open_site(self, cluster: str, endpoint_id: str, artifact_uri: str) -> endpoint_sites.RemoteSite:
        record = self.jobs.store.get_cluster(cluster)
        backend = get_backend(record.backend, self.clusters.home)
        return endpoint_sites.RemoteSite.open(backend.host(record.runtime), backend.commands(record.runtime),
                                              backend.jobs_root(cluster, record.runtime), endpoint_id, artifact_uri,
                                              cluster)

    def _maintain(self, front: Front, launch: "_Launch", ref: ModelRef, low: int, high: int) -> None:
        """On the front's health thread, every 2 s: replace dead replicas, then scale (the rule:
        ``SCALE_UP_LOAD``, ``SCALE_DOWN_IDLE``)."""
        self._replace_dead(front, launch, ref)
        if launch.site is not None and launch.recorded != launch.site.forwards:  # a replica found: its forward
            self._record_replicas(front, launch, ref)
        load = front.load()  # requests outstanding per replica now
        launch.loads = (launch.loads + [load])[-SCALE_UP_CHECKS:]
        now = time.monotonic()
        if load > 0:
            launch.busy_at = now
        count = len(front.replicas)
        if count < high and len(launch.loads) == SCALE_UP_CHECKS and min(launch.loads) >= SCALE_UP_LOAD:
            if front.stopping:
                return
            job, new = self._start_replica(launch)
            if not front.add(new):  # undeployed meanwhile: its list of jobs did not have this one
                self._end_jobs([job])
                return
            launch.loads = []
            self._record_replicas(front, launch, ref)
        elif count > low and now - launch.busy_at >= SCALE_DOWN_IDLE and now - launch.scaled_at >= SCALE_DOWN_IDLE:
            gone = front.remove_idle()
            if gone is not None:
                launch.scaled_at = now
                self._record_replicas(front, launch, ref)
                self._end_jobs([self.jobs.get(gone.job, launch.cluster)])
                if launch.site is not None:
                    launch.site.release(gone.job)

    def _record_replicas(self, front: Front, launch: "_Launch", ref: ModelRef) -> None:
        if launch.site is not None:
            launch.recorded = dict(launch.site.forwards)
        self.tables.update_deployment(ref, launch.endpoint_id, {"replicas": _replica_rows(front.replicas, launch.site)})

    def _replace_dead(self, front: Front, launch: "_Launch", ref: ModelRef) -> None:
        """On the front's health thread, every 2 s: a replica whose job ended after it had served
        (answered its health check once) is replaced by a new job. One that never answered is not:
        its server cannot start (deploy() says why), and a new job would fail the same way."""
        for replica in list(front.replicas):
            if not replica.was_healthy or not self.jobs.get(replica.job, launch.cluster).finished:
                continue
            if front.stopping:
                return
            job, new = self._start_replica(launch)
            if not front.replace(replica, new):  # undeployed meanwhile: its list of jobs did not have this one
                self._end_jobs([job])
                return
            if launch.site is not None:
                launch.site.release(replica.job)
            self._record_replicas(front, launch, ref)

    def _check_cluster(self, cluster: str) -> bool:
        """Whether ``cluster``'s replicas run on another machine (an attached cluster's nodes)."""
        found = self.clusters.get(cluster, with_status=False)  # ClusterNotFound names the known ones
        if found.backend == "slurm" or is_training_runtime(found.runtime):  # reached through a login node
            return True
        network = getattr(getattr(found.spec, "local", None), "network", None)
        if found.backend != "local" or network not in ("host", "namespaces"):
            raise SpecError("cluster", cluster, f"serving deploys to local clusters, attached slurm clusters and Vertex "
                                                f"AI training clusters; "
                                                f"{cluster} is a {found.backend} cluster" + (f" with network {network}"
                                                                                           if network else ""))
        return network == "namespaces"  # its nodes are machines of their own, each with its address

    def _wait_ready(self, endpoint_id: str, jobs: list, timeout: float) -> None:
        front = self.fronts[endpoint_id]
        deadline = time.monotonic() + timeout
        checked = 0.0
        while not any(r["healthy"] for r in front.snapshot()):
            now = time.monotonic()
            if now > deadline:
                why = "; ".join(f"{r['job']}: {r['last_error']}" for r in front.snapshot())
                raise JobTimeout(jobs[0].id, jobs[0].name, jobs[0].state, timeout, until=f"serving ({why})")
            if now - checked > 1.0:  # a replica whose job ended will never answer: say why at once
                checked = now
                for job in jobs:
                    if job.finished:
                        tail = "\n".join(job.logs().splitlines()[-15:])
                        raise GtcError(f"replica job {job.id} of endpoint {endpoint_id} ended {job.state} before "
                                       f"its server answered; its log ends:\n{tail}")
            time.sleep(0.05)

    def _settle(self, endpoint_id: str, jobs: list, timeout: float) -> None:
        try:
            self._wait_ready(endpoint_id, jobs, timeout)
        except KeyError:
            return  # undeployed meanwhile
        except Exception as e:  # noqa: BLE001 - whatever went wrong, the endpoint must not stay half-made
            if endpoint_id not in self.fronts:
                return
            self.failures[endpoint_id] = str(e)
            print(f"endpoint {endpoint_id}: deploy failed, undeployed: {e}", flush=True)
            try:
                self.undeploy(endpoint_id)
            except GtcError:
                pass

    def _still_deployed(self, ref: ModelRef, endpoint_id: str) -> bool:
        """Whether the front still has something to serve: undeployed from another process, or its
        cluster deleted under it (its replicas went with it: trying to replace them every tick
        only printed "no job" for ever), it has not."""
        try:
            found = self.tables.resolve(ref).deployment
            if found and found.get("endpoint") == endpoint_id:
                self.clusters.get(found["cluster"], with_status=False)
        except GtcError:  # ClusterNotFound among them
            return False
        return bool(found) and found.get("endpoint") == endpoint_id

    # -- predicting -------------------------------------------------------------------------

    def predict(self, endpoint_id: str, instances: list[Any], timeout: float = PREDICT_TIMEOUT) -> list[Any]:
        if not isinstance(instances, list) or not instances:
            raise SpecError("instances", instances, "a non-empty list, e.g. [{'prompt': 'Hello', 'max_tokens': 8}]")
        front = self._front_address(endpoint_id)
        body = json.dumps({"instances": instances}).encode()
        for attempt in (1, 2):
            connection = self._connection(front, timeout)
            try:
                connection.request("POST", f"/v1/endpoints/{endpoint_id}:predict", body=body,
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                data = response.read()
            except ConnectionRefusedError:
                self._addresses.pop(endpoint_id, None)
                connection.close()
                raise PredictionError(endpoint_id, 503, f"nothing answers at {front['host']}:{front['port']}: the "
                                                        f"process that served it (pid {front['pid']}) has ended; "
                                                        f"undeploy it and deploy again") from None
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                connection.close()
                self._local.connections.pop((front["host"], front["port"]), None)
                if attempt == 1 and connection.reused:  # a kept-alive connection the front had closed
                    continue
                raise
            if response.will_close:
                connection.close()
                self._local.connections.pop((front["host"], front["port"]), None)
            break
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        if response.status != 200 or not isinstance(answer, dict) or "predictions" not in answer:
            message = answer.get("error", {}).get("message") if isinstance(answer, dict) else None
            raise PredictionError(endpoint_id, response.status, message or data[:300].decode(errors="replace"))
        return answer["predictions"]

    def _front_address(self, endpoint_id: str) -> dict[str, Any]:
        """Where the endpoint's front listens, read from the registry once per endpoint: a row read
        per prediction would cost more than the prediction's overhead budget."""
        found = self._addresses.get(endpoint_id)
        if found is None:
            found = self._addresses[endpoint_id] = self.find(endpoint_id).deployment["front"]
        return found

    def _connection(self, front: dict[str, Any], timeout: float) -> http.client.HTTPConnection:
        """This thread's kept-alive connection to ``front`` (the front checks who calls once per
        connection, from the kernel's socket tables)."""
        connections = getattr(self._local, "connections", None)
        if connections is None:
            connections = self._local.connections = {}
        key = (front["host"], front["port"])
        connection = connections.get(key)
        if connection is None:
            connection = connections[key] = http.client.HTTPConnection(*key, timeout=timeout)
            connection.reused = False
        else:
            connection.reused = True
            connection.timeout = timeout
        return connection

    # -- undeploying ------------------------------------------------------------------------

    def undeploy(self, endpoint_id: str) -> None:
        """Stop the front (where this process serves it), cancel the replicas' jobs and wait for
        them to end (their ports free), then clear the registry's row (an ``undeploy`` event)."""
        record = self.find(endpoint_id)
        self._addresses.pop(endpoint_id, None)
        front = self.fronts.pop(endpoint_id, None)
        if front is not None:
            front.stop()
        deployment = record.deployment
        jobs = []
        serving = [{"job": r.job} for r in front.replicas] if front is not None else []  # a replacement not yet in the row
        for replica in {r["job"]: r for r in [*deployment["replicas"], *serving]}.values():
            try:
                jobs.append(self.jobs.get(replica["job"], deployment["cluster"]))
            except GtcError:
                pass  # the cluster or the job is gone already
        self._end_jobs(jobs)
        self._release_site(endpoint_id, deployment)
        self.tables.set_deployment(ModelRef(record.model, version=record.version), None, _user())
        folder = Path(deployment["folder"])
        for path in folder.glob("replica*"):  # the token and specs; requests.jsonl stays, for its history
            path.unlink(missing_ok=True)

    def _release_site(self, endpoint_id: str, deployment: dict[str, Any]) -> None:
        """An attached cluster's: the forwards (this process's, and those the row says another
        process made) and the endpoint's folder there."""
        site = self._sites.pop(endpoint_id, None)
        if site is None and not deployment.get("site_folder"):
            return
        try:
            record = self.jobs.store.get_cluster(deployment["cluster"])
            host = get_backend(record.backend, self.clusters.home).host(record.runtime)
        except GtcError:
            return  # the cluster is gone: so are its forwards' other ends
        forwards = {f["local"]: f for f in [*(r.get("forward") for r in deployment["replicas"]),
                                             *(site.forwards.values() if site else ())] if f}
        for forward in forwards.values():
            endpoint_sites.cancel(host, forward)
        if deployment.get("site_folder"):
            try:
                host.remove_tree(deployment["site_folder"])
            except GtcError:
                pass

    def _end_jobs(self, jobs: list) -> None:
        for job in jobs:
            if not job.finished:
                try:
                    job.cancel()
                except GtcError:
                    pass
        for job in jobs:
            try:
                job.wait(timeout=60)
            except GtcError:
                pass


@dataclass
class _Launch:
    """What each replica of an endpoint is started from (its first ones and their replacements)."""

    cluster: str
    folder: Path
    storage_uri: str
    model: str
    endpoint_id: str
    deployed_model_id: str
    command: list[str] | None
    options: list[str]
    token_file: str
    site: Any = None  # endpoint_sites.RemoteSite where the replicas run on another machine
    recorded: dict = field(default_factory=dict)  # the site's forwards as the row last recorded them
    started: int = 0
    loads: list = field(default_factory=list)  # outstanding requests per replica at the last checks
    busy_at: float = field(default_factory=time.monotonic)  # when a request was last outstanding
    scaled_at: float = field(default_factory=time.monotonic)  # when a replica was last removed


def _replica_rows(replicas: list[Replica], site) -> list[dict[str, Any]]:
    forwards = site.forwards if site is not None else {}
    return [{"job": r.job, "host": r.host, "port": r.port, **({"forward": forwards[r.job]} if r.job in forwards
                                                               else {})} for r in replicas]


def _check_replicas(low: object, high: object) -> None:
    if isinstance(low, bool) or not isinstance(low, int) or low < 1:
        raise SpecError("min_replicas", low, "a whole number, 1 or more")
    if isinstance(high, bool) or not isinstance(high, int) or high < low:
        raise SpecError("max_replicas", high, f"a whole number, at least min_replicas ({low})")


def _private_dir(parent: Path, name: str) -> Path:
    parent.mkdir(mode=0o700, exist_ok=True)
    folder = parent / name
    folder.mkdir(mode=0o700)
    return folder


def _private_file(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # 0600 from the start
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def _count(read: Callable[[], list]) -> int:
    """How many ``read()`` lists; 0 once the endpoint is gone (undeployed meanwhile)."""
    try:
        return len(read())
    except (GtcError, KeyError, TypeError):
        return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
