"""``--backend vertex`` given a cluster spec (node pools): a Vertex AI training cluster
(``modelDevelopmentClusters``) that jupyter_gtc creates, scales and deletes, beside the
``vertex`` backend's targets (``vertex.py``: jobs as CustomJobs), which only attach.

- ``create`` sends the spec as validated (``to_vertex()``: our spec's JSON in Vertex's
  camelCase) and waits on the operation, each ``progressMessage`` a progress line; the id is
  kept in ``runtime`` only once Google accepted the create, so a rollback deletes our cluster
  and never someone else's of that name (``ALREADY_EXISTS``).
- ``status`` is a ``get``: ``clusterStatus.state``/``detail`` in the details; the nodes are
  Slurm's, asked through the login node, each with its pool and host from ``nodesStatus``
  (where the login node does not answer: each of ``nodesStatus`` a node, in Vertex's words).
- ``scale`` is a patch of ``node_pools``; ``delete`` deletes it (gone already: nothing to do).
- Project, region and API come from ``gtc config`` (``vertex.*``), the environment and gcloud's
  configuration, as a target's do, without a staging bucket (jobs do not go through one).
  ``vertex.api_endpoint`` is Google's by default, ``http://127.0.0.1:PORT`` for a local Vertex
  endpoint of another GTC_HOME, or ``local[:PORT]`` for this one's. An operation is polled
  from every 5 s (``GTC_VERTEX_POLL_S``: tests against the local endpoint poll faster) up to 30 s.

Jobs go through the cluster's login node (``vertex_login.py``): the ``slurm`` backend's own
methods over it (host, job_launch, job_container, jobs_root, work_dir, partitions), the
scheduler's calls over SSH too (``login.jobs: ssh``) or through the Slurm Job API (``api``:
``vertex_clusters/slurm_api.SlurmJobApi``). ``VertexBackends`` routes each call of the
``vertex`` backend to one of the two, by the spec it is given (node pools or not) or the
runtime a create left.
"""

from __future__ import annotations

import os
from typing import Any

from ..exceptions import CloudApiError, CommandError, GtcError, SpecError
from ..slurm.parse import NodeStatus
from ..spec import machines
from ..spec.cluster import ClusterSpec
from ..spec.vertex_cluster import is_training_cluster
from . import vertex_login
from .base import Backend, ClusterStatus, JobLaunch, PartitionLayout, Progress, no_progress

_KIND = "training_cluster"  # runtime["kind"]: what routes a runtime-only call to this backend


def is_training_runtime(runtime: dict[str, Any]) -> bool:
    """Whether a ``vertex`` cluster's runtime is a training cluster's (not a Vertex target's)."""
    return runtime.get("kind") == _KIND


class VertexTrainingBackend(Backend):
    name = "vertex"
    attaches = False  # created, scaled and deleted by us
    stands_in = True  # a notebook's local spec of its name runs on it as it is (``ClusterService.apply``)

    def __init__(self, home):
        super().__init__(home)
        from .slurm import SlurmBackend

        self.slurm = SlurmBackend(home)  # whose methods reach the login node

    def problems(self) -> list[str]:
        import importlib.util

        if importlib.util.find_spec("google.auth") is None or importlib.util.find_spec("requests") is None:
            return ["Vertex AI training clusters need google-auth and requests (jupyter_gtc's cloud extra): "
                    "pip install 'google-cloud-aiplatform>=2.7,<3'"]
        return []

    def parse_spec(self, data: Any, display_name: str | None = None) -> ClusterSpec:
        from ..spec.vertex_cluster import parse_training_cluster

        return parse_training_cluster(data, display_name)

    def check_spec(self, spec: ClusterSpec) -> None:
        if not isinstance(spec, ClusterSpec):
            raise SpecError("spec", type(spec).__name__, "a cluster spec with node pools (a training cluster)")
        self.parse_spec(spec)  # the id rule, for a spec parsed by another backend
        resolve(self.home)  # a project or region set nowhere is refused before anything is recorded

    # -- the cluster's life ----------------------------------------------------------------

    def create(self, spec: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        runtime.update(resolve(self.home), kind=_KIND)
        client = _client(runtime, self.home)
        try:
            operation = client.begin_create(spec.name, spec.to_vertex())
        except CloudApiError as e:
            if e.status != "ALREADY_EXISTS":
                raise
            cluster = client.get(spec.name)
            check_fits_existing(spec, cluster)  # nothing recorded where it does not
            runtime.update(cluster_id=spec.name, attached=True)  # never deleted or resized by us
            progress(f"training cluster {spec.name} exists in {client.parent}: attached as it is (its delete "
                     f"here forgets it; it is deleted on Vertex only where it was made)")
        else:
            runtime["cluster_id"] = spec.name  # ours from here on: a rollback deletes it
            progress(f"creating training cluster {spec.name} in {client.parent}")
            client.wait(operation, f"create training cluster {spec.name}", progress,
                        context=request_context(spec.to_vertex(), spec.name))  # a stockout's message names zones
            cluster = client.get(spec.name)
        login = getattr(spec, "login", None)
        runtime.update(login_pool=spec.slurm.login_node_pool_id,
                       jobs=(login and login.jobs) or vertex_login.DEFAULT_JOBS,
                       login_section=login.model_dump(mode="json", exclude_none=True) if login else {})
        if vertex_login.attach(self.slurm, spec.name, runtime, cluster, self.ssh_config(), progress):
            progress(f"jobs go through login node {runtime['login']['ssh']['host']} "
                     f"({'the Slurm Job API' if runtime['jobs'] == 'api' else 'over SSH'})")
        progress(f"training cluster {spec.name} is {_state(cluster)}")

    def status(self, spec: ClusterSpec, runtime: dict[str, Any]) -> ClusterStatus:
        details = {k: runtime.get(k) for k in ("project", "region", "api_endpoint") if runtime.get(k)}
        try:
            # A short wait: the sidebar lists clusters every few seconds, and an API that does
            # not answer is said as the cluster's problem (UNREACHABLE), not a stalled list.
            cluster = _client(runtime, self.home, timeout_s=10.0).get(runtime["cluster_id"])
        except (CloudApiError, GtcError) as e:
            return ClusterStatus(False, [], details, str(e))
        state = cluster.get("clusterStatus") or {}
        details |= {"vertex_state": state.get("state"), "vertex_name": cluster.get("name"),
                    "login_node": vertex_login.login_instance(cluster, runtime.get("login_pool")) or "(none reported)",
                    "jobs": runtime.get("jobs")}
        if state.get("detail"):
            details["vertex_detail"] = state["detail"]
        error = state.get("error")
        problem = (error.get("message") if isinstance(error, dict) else str(error)) if error else None
        from ..vertex_clusters.events import EventLog, with_drain_reasons

        # Each node's drain reason is its newest drain event's: nodesStatus carries none.
        nodes = with_drain_reasons(_nodes(spec, state.get("nodesStatus") or []),
                                   EventLog(self.home, runtime["cluster_id"]).merge(cluster))
        login = vertex_login.login_runtime(self, runtime, retry=False)
        if login is None:
            details["login_problem"] = runtime.get("login_problem") or "not reached yet: a job asks for it"
        else:
            try:
                nodes = _with_vertex(self.commands(runtime).nodes(), nodes)  # Slurm's states, drains, GPUs
            except CommandError as e:
                details["login_problem"] = f"Slurm did not answer through the login node: {e}"
        return ClusterStatus(True, nodes, details, problem)

    def scale(self, old: ClusterSpec, new: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        if runtime.get("attached"):
            raise GtcError(f"training cluster {old.name} was attached (it existed on Vertex before): jupyter_gtc never "
                           f"resizes a cluster made elsewhere; resize it where it was made, or create one of your own")
        client = _client(runtime, self.home)
        for pool in new.node_pools:
            if pool.node_count != old.pool(pool.id).node_count:
                client.scale(runtime["cluster_id"], pool.id, pool.node_count, progress)
        login = vertex_login.login_runtime(self, runtime, retry=False)
        if login is not None:  # Slurm's partitions as the login node now reads them
            from .slurm import _read_partitions

            login["partitions"] = _read_partitions(self.slurm.commands(login))

    def delete(self, spec: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        """Delete the training cluster, if it was ours (its create accepted). Idempotent."""
        cluster_id = runtime.get("cluster_id")
        if not cluster_id:
            return
        login = vertex_login.login_runtime(self, runtime, retry=False)
        if login is not None:
            self.slurm.delete(vertex_login.login_spec(runtime), login, no_progress)  # its shared connection
        vertex_login.forget(runtime)
        if runtime.get("attached"):
            progress(f"forgot training cluster {cluster_id}: it keeps running on Vertex, where it was made")
            return
        try:
            _client(runtime, self.home).delete(cluster_id, progress)
        except CloudApiError as e:
            if e.status != "NOT_FOUND":
                raise
        progress(f"deleted training cluster {cluster_id}")

    # -- the cluster's own events, and nodes reported faulty ------------------------------------

    def events(self, spec: ClusterSpec, runtime: dict[str, Any]) -> list[dict[str, Any]]:
        """``clusterEvents`` (drains, replacements) as History rows, oldest first, kept across
        polls once each (``vertex_clusters/events.py``); where Vertex does not answer, those kept."""
        from ..vertex_clusters.events import EventLog

        if not runtime.get("cluster_id"):
            return []  # its create was never accepted: Vertex has no cluster of ours
        log = EventLog(self.home, runtime["cluster_id"])
        if (kept := log.recent(5.0)) is not None:
            return kept  # a get of the last few seconds (the cluster list's) brought them: spare Vertex's quota
        try:
            cluster = _client(runtime, self.home, timeout_s=10.0).get(runtime["cluster_id"])
        except (CloudApiError, GtcError):
            return log.read()  # the History stays readable while the API is away
        return log.merge(cluster)

    def report_faulty(self, spec: ClusterSpec, runtime: dict[str, Any], node: str, reasons: list[dict[str, str]],
                      progress: Progress) -> None:
        """Report ``node`` faulty (``reportFaultyNodes``), so Vertex replaces it, and wait on the
        operation. A node Vertex does not list is refused, naming those it does."""
        client = _client(runtime, self.home)
        listed = [n.get("instanceName") for n in (client.get(runtime["cluster_id"]).get("clusterStatus") or {})
                  .get("nodesStatus") or []]
        # Vertex's documented node id is CLUSTER-POOL-INDEX; nodesStatus names instances: either is taken.
        ids = [f"{runtime['cluster_id']}-{p.id}-{i}" for p in spec.compute_pools() for i in range(p.node_count)]
        if node not in listed and node not in ids:
            raise SpecError("node", node, f"a node of training cluster {spec.name}: {', '.join(map(str, listed))} "
                                          f"(or Vertex's id of one, {', '.join(ids)})")
        progress(f"reporting node {node} of training cluster {spec.name} faulty")
        client.report_faulty_node(runtime["cluster_id"], node, reasons, progress)
        progress(f"reported {node}: Vertex replaces it (its events show when: gtc cluster events {spec.name})")

    def health(self, spec: ClusterSpec, runtime: dict[str, Any], now: bool) -> list:
        """No run of our checks: they run as the HealthCheckProgram and prolog of a slurm.conf we
        write, and Vertex writes a training cluster's and runs its own checks in each job's prolog
        and epilog, replacing a node they fail (README, Vertex AI training clusters). So each
        node's health row is its state and drain reason alone ("not checked"); its drains and
        replacements are in the History, and ``report_faulty`` reports one a user judges faulty."""
        return []

    # -- jobs: through the login node (vertex_login.py) -------------------------------------

    def ssh_config(self) -> str | None:
        from ..state import config

        return config.load(self.home).get("vertex.ssh_config")

    def vertex_cluster(self, runtime: dict[str, Any]) -> dict[str, Any]:
        return _client(runtime, self.home, timeout_s=10.0).get(runtime["cluster_id"])

    def _login(self, runtime: dict[str, Any]):
        """The login node's attach spec and ``slurm`` runtime; ``LoginUnreachable`` where it does not answer."""
        login = vertex_login.login_runtime(self, runtime)
        return vertex_login.login_spec(runtime), login

    def host(self, runtime: dict[str, Any]):
        login = vertex_login.login_runtime(self, runtime, retry=False)
        # Not known yet: one found at each use, so that listing every cluster's jobs does not fail on it.
        return self.slurm.host(login) if login is not None else vertex_login.LoginHost(self, runtime)

    def client_env(self, runtime: dict[str, Any]) -> dict[str, str]:
        login = vertex_login.login_runtime(self, runtime, retry=False)
        return self.slurm.client_env(login) if login is not None else {}

    def commands(self, runtime: dict[str, Any]):
        _, login = self._login(runtime)
        if runtime.get("jobs", "ssh") == "ssh":
            return self.slurm.commands(login)
        try:
            from ..vertex_clusters.slurm_api import SlurmJobApi
        except ImportError:
            raise GtcError(f"cluster {runtime['cluster_id']}: login.jobs is api, and this jupyter_gtc has no Slurm "
                           f"Job API client; set login.jobs: ssh in the cluster's spec") from None
        return SlurmJobApi(_client(runtime, self.home), runtime["cluster_id"], self.slurm.host(login),
                           accounting=login.get("accounting", False))  # as the login node read slurm.conf

    def jobs_root(self, cluster: str, runtime: dict[str, Any]) -> str:
        return self.slurm.jobs_root(cluster, self._login(runtime)[1])

    def partitions(self, spec: ClusterSpec, runtime: dict[str, Any]) -> list[PartitionLayout]:
        login = vertex_login.login_runtime(self, runtime, retry=False)
        if login is None:  # the spec's, until Slurm is reached
            return super().partitions(spec, runtime)
        return self.slurm.partitions(vertex_login.login_spec(runtime), login)

    def job_launch(self, spec: Any, runtime: dict[str, Any], script: str, variables: dict[str, str],
                   python_env: Any) -> JobLaunch:
        return self.slurm.job_launch(*self._login(runtime), script, variables, python_env)

    def job_container(self, spec: Any, runtime: dict[str, Any], request: Any, launch: JobLaunch, job_dir, work_dir):
        return self.slurm.job_container(*self._login(runtime), request, launch, job_dir, work_dir)

    def min_poll_interval(self, runtime: dict[str, Any]) -> float:
        login = vertex_login.login_runtime(self, runtime, retry=False)
        if login is not None and runtime.get("jobs", "ssh") == "ssh":
            return self.slurm.min_poll_interval(login)
        return 5.0  # a call per poll counts against Vertex's per-minute quota


def resolve(home) -> dict[str, Any]:
    """Project, region and API of training clusters: ``gtc config``, the environment, gcloud's
    configuration (first found wins), as a Vertex target's; no staging bucket."""
    from ..exceptions import SettingMissing
    from ..spec.vertex_target import local_port
    from ..state import config
    from . import vertex_client

    settings = config.load(home)
    gcloud = vertex_client._gcloud_properties()
    endpoint = settings.get("vertex.api_endpoint")
    local = local_port(endpoint) is not False or (endpoint or "").startswith("http://")

    def first(key: str, *more: str | None) -> str:
        found = next((v for v in (settings.get(f"vertex.{key}"), *more) if v), None)
        if found is None and local:
            return vertex_client.LOCAL_DEFAULTS[key]
        if found is None:
            raise SettingMissing(f"vertex.{key}", vertex_client.HOW[key].replace(", or give " + key + " in the "
                                                                                  "Vertex target", ""))
        return found

    resolved = {
        "project": first("project", os.environ.get("GOOGLE_CLOUD_PROJECT"), os.environ.get("CLOUDSDK_CORE_PROJECT"),
                         gcloud.get(("core", "project"))),
        "region": first("region", os.environ.get("CLOUD_ML_REGION"), os.environ.get("CLOUDSDK_AI_REGION"),
                        gcloud.get(("ai", "region")), os.environ.get("CLOUDSDK_COMPUTE_REGION"),
                        gcloud.get(("compute", "region"))),
    }
    for key, pattern, valid in (("project", config.PROJECT_RE, config.VALID_PROJECT),
                                ("region", config.REGION_RE, config.VALID_REGION)):
        if not pattern.fullmatch(resolved[key]):
            raise SpecError(f"vertex.{key}", resolved[key], f"{valid} (found where it was set: gtc config, the "
                                                            f"environment or gcloud's configuration)")
    return resolved | ({"api_endpoint": endpoint} if endpoint else {})


def request_context(body: dict[str, Any], cluster_id: str) -> dict[str, Any]:
    from ..vertex_clusters.client import request_context

    return request_context(body, cluster_id)


def _client(runtime: dict[str, Any], home, timeout_s: float = 60.0):
    from ..spec.vertex_target import local_port
    from ..vertex_clusters.client import TrainingClusters
    from . import vertex_client

    endpoint = runtime.get("api_endpoint")
    if local_port(endpoint) is not False:  # this GTC_HOME's local endpoint, found by its record
        endpoint = vertex_client.local_endpoint(runtime, home).api_endpoint
    return TrainingClusters(runtime["project"], runtime["region"], api_endpoint=endpoint,
                            poll_s=float(os.environ.get("GTC_VERTEX_POLL_S", "5")), timeout_s=timeout_s)


def check_fits_existing(spec: ClusterSpec, cluster: dict[str, Any]) -> None:
    """Refuse to attach Vertex's ``cluster`` (made elsewhere, of the spec's id) where a compute
    pool of ``spec`` is missing there, has another machine type or fewer nodes: naming the pool,
    what Vertex has, and the two ways on."""
    have = {p.get("id"): p for p in _field(cluster, "nodePools", "node_pools") or []}
    for i, pool in enumerate(spec.compute_pools()):
        got = have.get(pool.id) or {}
        nodes = int(_field(_field(got, "scalingSpec", "scaling_spec") or {}, "minNodeCount", "min_node_count") or 0)
        if _machine_type(got) != pool.machine_spec.machine_type or nodes < pool.node_count:
            found = ", ".join(f"{pool_id} ({_machine_type(p)})" for pool_id, p in have.items()) or "none"
            raise SpecError(f"node_pools[{i}]", pool.id,
                            f"a pool of training cluster {spec.name}, which exists on Vertex (made elsewhere) with "
                            f"pools {found}: give the spec those pools to attach it, or another display_name "
                            f"to create a cluster of your own")


def _field(data: dict[str, Any], camel: str, snake: str) -> Any:
    return data.get(camel, data.get(snake))  # Vertex answers camelCase; a spec file may be snake_case


def _machine_type(pool: dict[str, Any]) -> str | None:
    return _field(_field(pool, "machineSpec", "machine_spec") or {}, "machineType", "machine_type")


def _state(cluster: dict[str, Any]) -> str:
    return (cluster.get("clusterStatus") or {}).get("state") or "in an unknown state"


def _nodes(spec: ClusterSpec, statuses: list[dict[str, Any]]) -> list[NodeStatus]:
    """``nodesStatus`` as our nodes: the instance's name, Vertex's node state, the partitions and
    GPUs of its pool (from the spec: pools may come back in another order)."""
    pools = {p.id: p for p in spec.node_pools}
    out = []
    for node in statuses:
        pool_id = node.get("nodePoolId") or ""
        if pool_id and pool_id == spec.slurm.login_node_pool_id:
            continue  # the login node runs no jobs: it is the status' login_node
        pool = pools.get(pool_id)
        machine = machines.lookup(pool.machine_spec.machine_type) if pool else None
        parts = tuple(p.id for p in spec.slurm.partitions if pool_id in p.node_pool_ids)
        gpus = machine.gpu_count if machine else 0
        out.append(NodeStatus(node.get("instanceName") or "", node.get("nodeState") or "UNKNOWN", (), None, parts,
                              0, 0, 0, 0, gpus, 0,
                              extra={"pool": pool_id, "physical_host": node.get("physicalHost") or ""}))
    return out


def _with_vertex(slurm: list[NodeStatus], vertex: list[NodeStatus]) -> list[NodeStatus]:
    """Slurm's nodes, each with its pool, host and Vertex's state where Vertex names it alike."""
    import dataclasses

    by_name = {n.name: n for n in vertex}
    return [dataclasses.replace(n, extra={**n.extra, **({**by_name[n.name].extra, "vertex_state": by_name[n.name].state}
                                                        if n.name in by_name else {})}) for n in slurm]


class VertexBackends(Backend):
    """The ``vertex`` backend: each call goes to the training-cluster backend (a spec with node
    pools, or a runtime its create left) or to the Vertex target's (``vertex.py``)."""

    name = "vertex"
    attaches = True  # a target's; services ask ``get_backend(..., spec)`` where it matters

    def __init__(self, home):
        super().__init__(home)
        from .vertex import VertexBackend

        self.target, self.training = VertexBackend(home), VertexTrainingBackend(home)

    def _by_spec(self, spec: Any) -> Backend:
        return self.training if isinstance(spec, ClusterSpec) or (
            isinstance(spec, dict) and is_training_cluster(spec)) else self.target

    def _by_runtime(self, runtime: dict[str, Any]) -> Backend:
        return self.training if runtime.get("kind") == _KIND else self.target

    def problems(self) -> list[str]:
        return self.target.problems()

    def parse_spec(self, data: Any, display_name: str | None = None) -> Any:
        return self.target.parse_spec(data, display_name)  # it tells the two apart already

    def check_spec(self, spec: Any) -> None:
        self._by_spec(spec).check_spec(spec)

    def not_applied(self, spec: Any):
        return self._by_spec(spec).not_applied(spec)

    def create(self, spec: Any, runtime: dict[str, Any], progress: Progress) -> None:
        self._by_spec(spec).create(spec, runtime, progress)

    def status(self, spec: Any, runtime: dict[str, Any]) -> ClusterStatus:
        return self._by_spec(spec).status(spec, runtime)

    def scale(self, old: Any, new: Any, runtime: dict[str, Any], progress: Progress) -> None:
        self._by_spec(old).scale(old, new, runtime, progress)

    def delete(self, spec: Any, runtime: dict[str, Any], progress: Progress) -> None:
        self._by_spec(spec).delete(spec, runtime, progress)

    def partitions(self, spec: Any, runtime: dict[str, Any]):
        return self._by_spec(spec).partitions(spec, runtime)

    def work_dir(self, spec: Any, runtime: dict[str, Any], submit_dir: str):
        return self._by_spec(spec).work_dir(spec, runtime, submit_dir)

    def job_launch(self, spec: Any, runtime: dict[str, Any], script: str, variables: dict[str, str],
                   python_env: Any) -> JobLaunch:
        return self._by_spec(spec).job_launch(spec, runtime, script, variables, python_env)

    def job_container(self, spec: Any, runtime: dict[str, Any], request: Any, launch: JobLaunch, job_dir, work_dir):
        return self._by_spec(spec).job_container(spec, runtime, request, launch, job_dir, work_dir)

    def health(self, spec: Any, runtime: dict[str, Any], now: bool):
        return self._by_spec(spec).health(spec, runtime, now)

    def events(self, spec: Any, runtime: dict[str, Any]):
        return self._by_spec(spec).events(spec, runtime)

    def client_env(self, runtime: dict[str, Any]) -> dict[str, str]:
        return self._by_runtime(runtime).client_env(runtime)

    def commands(self, runtime: dict[str, Any]):
        return self._by_runtime(runtime).commands(runtime)

    def host(self, runtime: dict[str, Any]):
        return self._by_runtime(runtime).host(runtime)

    def min_poll_interval(self, runtime: dict[str, Any]) -> float:
        return self._by_runtime(runtime).min_poll_interval(runtime)

    def jobs_root(self, cluster: str, runtime: dict[str, Any]) -> str:
        return self._by_runtime(runtime).jobs_root(cluster, runtime)


def vertex_backend(home, spec: Any = None) -> Backend:
    """The ``vertex`` backend for a cluster of ``spec`` (a spec or its record's JSON), or, without
    one, the one that routes each call by what it is given."""
    if spec is None:
        return VertexBackends(home)
    if isinstance(spec, ClusterSpec) or (isinstance(spec, dict) and is_training_cluster(spec)):
        return VertexTrainingBackend(home)
    from .vertex import VertexBackend

    return VertexBackend(home)
