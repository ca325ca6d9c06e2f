"""The cluster spec: the JSON (or YAML) of a Vertex AI training cluster
(``ModelDevelopmentCluster``), in camelCase or snake_case, plus an optional ``local``
block for options only the local backend understands.

``parse_cluster_spec`` is the single entry point: it validates everything (field types,
unknown fields, machine types, references between pools and partitions) and raises
``SpecErrors`` naming each bad field, its value and what would be valid. A spec that
parses is safe to provision from.
"""

from __future__ import annotations

import functools
import posixpath
import re
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from ..exceptions import SpecError, SpecErrors
from . import machines
from .errors import spec_errors

# Vertex: lowercase letters, digits and hyphens, starting with a letter, at most 10 chars.
DISPLAY_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,9}")  # fullmatch: `$` alone lets "abc\n" through


def checked_display_name(value: str) -> str:
    """An attach spec's or a Vertex target's display_name, as a pydantic validator wants it."""
    if not DISPLAY_NAME_RE.fullmatch(value):
        raise ValueError("use lowercase letters, digits and hyphens, starting with a letter, at most 10 characters")
    return value
# Pool and partition ids become Slurm node and partition names (and file names).
ID_RE = re.compile(r"[a-z][a-z0-9-]{0,30}")
ID_RULE = "use lowercase letters, digits and hyphens, starting with a letter, at most 31 characters"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
    )


class ProvisioningModel(str, Enum):
    ON_DEMAND = "ON_DEMAND"
    SPOT = "SPOT"
    RESERVATION = "RESERVATION"
    FLEX_START = "FLEX_START"


class MachineSpec(_Model):
    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int | None = Field(default=None, ge=0)
    reservation_affinity: dict[str, Any] | None = None


class ScalingSpec(_Model):
    min_node_count: int = Field(ge=1, le=1000)
    max_node_count: int = Field(ge=1, le=1000)


class BootDisk(_Model):
    boot_disk_type: str = "pd-ssd"
    boot_disk_size_gb: int = Field(default=200, ge=10)


class Filestore(_Model):
    filestore: str = Field(min_length=1)
    """The instance's resource name (``projects/P/locations/Z/instances/I``)."""
    mount_path: str | None = None


class Lustre(_Model):
    lustre: str = Field(min_length=1)
    mount_path: str | None = None


class NodePool(_Model):
    id: str
    machine_spec: MachineSpec
    scaling_spec: ScalingSpec
    provisioning_model: ProvisioningModel = ProvisioningModel.ON_DEMAND
    zone: str | None = None
    enable_public_ips: bool | None = None
    boot_disk: BootDisk | None = None
    startup_script: str | None = None
    filestores: list[Filestore] = []
    lustres: list[Lustre] = []

    @property
    def node_count(self) -> int:
        return self.scaling_spec.min_node_count

    @property
    def machine(self) -> machines.MachineType:
        return machines.MACHINE_TYPES[self.machine_spec.machine_type]

    def node_names(self) -> list[str]:
        return [f"{self.id}-{i}" for i in range(self.node_count)]


class Partition(_Model):
    id: str
    node_pool_ids: list[str] = Field(min_length=1)


# Slurm's own spelling of a time (PreemptExemptTime): minutes, minutes:seconds,
# hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds.
SLURM_TIME_RE = re.compile(r"(\d+-)?\d+(:\d+){0,2}")
PREEMPT_MODES = ("OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "WITHIN")
_TRES_WEIGHTS = r"^[A-Za-z][A-Za-z0-9/:_-]*=\d+(,[A-Za-z][A-Za-z0-9/:_-]*=\d+)*$"  # CPU=1000,GRES/gpu=3000


class Scheduling(_Model):
    """Vertex's ``slurm_spec.scheduling``: a fixed set of slurm.conf parameters, each named
    as slurm.conf names it in snake_case (``priority_weight_age`` is ``PriorityWeightAge``)."""

    priority_type: Literal["priority/basic", "priority/multifactor"] | None = None
    priority_weight_age: int | None = Field(default=None, ge=0)
    priority_weight_assoc: int | None = Field(default=None, ge=0)
    priority_weight_fairshare: int | None = Field(default=None, ge=0)
    priority_weight_job_size: int | None = Field(default=None, ge=0)
    priority_weight_partition: int | None = Field(default=None, ge=0)
    priority_weight_qos: int | None = Field(default=None, ge=0)
    priority_weight_tres: str | None = Field(default=None, pattern=_TRES_WEIGHTS)
    """``CPU=1000,Mem=2000,GRES/gpu=3000``."""
    preempt_type: Literal["preempt/none", "preempt/partition_prio", "preempt/qos"] | None = None
    preempt_mode: str | None = None
    """Comma-separated: OFF, CANCEL, GANG, REQUEUE, SUSPEND, WITHIN (``SUSPEND,GANG``)."""
    preempt_exempt_time: str | None = None
    """In Slurm's time format (``30``, ``1:00:00``, ``1-0``)."""

    def slurm_conf(self) -> dict[str, str]:
        """The slurm.conf lines these settings are: ``{"PriorityType": "priority/multifactor", ...}``."""
        out = {}
        for field, value in self.model_dump(exclude_none=True).items():
            name = _SLURM_CONF_NAMES.get(field) or "".join(w.capitalize() for w in field.split("_"))
            out[name] = value.upper() if field == "preempt_mode" else str(value)
        return out


# Where capitalizing each word of the field's name does not give slurm.conf's spelling.
_SLURM_CONF_NAMES = {"priority_weight_qos": "PriorityWeightQOS", "priority_weight_tres": "PriorityWeightTRES"}


# AccountingStorageEnforce's words (slurm.conf(5)); "all" is every one but nojobs and nosteps.
ENFORCE_WORDS = ("associations", "limits", "nojobs", "nosteps", "qos", "safe", "wckeys", "all")


class Accounting(_Model):
    """Slurm's accounting database (slurmdbd), on by default: with it, ``sacct``, ``sacctmgr``
    and ``sreport`` work and finished jobs are remembered after slurmctld forgets them; without
    it, sacct-based tools (submitit, dask-jobqueue) see every job's state as UNKNOWN.
    ``accounting: {enabled: false}`` turns it off (``accounting: null`` too)."""

    enabled: bool = True
    """False: no slurmdbd (a local cluster then needs no MariaDB, and starts about a second
    sooner); ``sacct`` answers that accounting storage is disabled."""
    accounting_storage_enforce: str | None = None
    """slurm.conf's ``AccountingStorageEnforce``, comma-separated: associations, limits, qos,
    safe, wckeys, nojobs, nosteps or all (``associations,limits``). Jobs of a user without an
    association are then refused; the cluster's creator has one."""

    @field_validator("accounting_storage_enforce")
    @classmethod
    def _enforce(cls, value: str | None) -> str | None:
        if value is not None:
            bad = [w for w in value.split(",") if w.strip().lower() not in ENFORCE_WORDS]
            if bad or not value:
                raise ValueError(f"comma-separated words among {', '.join(ENFORCE_WORDS)}; "
                                 f"{', '.join(map(repr, bad)) or 'nothing'} is not one")
            value = ",".join(w.strip().lower() for w in value.split(","))
        return value

    def slurm_conf(self) -> dict[str, str]:
        """The slurm.conf lines of these settings (where the database is, the backend adds)."""
        return {"AccountingStorageEnforce": self.accounting_storage_enforce} if self.accounting_storage_enforce else {}


class SlurmSpec(_Model):
    partitions: list[Partition] = Field(min_length=1)
    login_node_pool_id: str | None = None
    home_directory_storage: str | None = Field(default=None, min_length=1)
    """A Filestore (or Lustre) instance's resource name, mounted at /home on every node."""
    prolog_bash_scripts: list[str] = []
    epilog_bash_scripts: list[str] = []
    accounting: Accounting = Accounting()
    scheduling: Scheduling | None = None

    @field_validator("accounting", mode="before")
    @classmethod
    def _accounting_off(cls, value: Any) -> Any:
        """``accounting: null`` is off, as ``{enabled: false}`` is (which is how it is stored:
        the stored JSON leaves nulls out, and a missing ``accounting`` is on)."""
        return {"enabled": False} if value is None else value


class OrchestratorSpec(_Model):
    slurm_spec: SlurmSpec


class Network(_Model):
    network: str | None = None
    subnetwork: str | None = None


class RuntimeSpec(_Model):
    service_account: str | None = None


class LocalOptions(_Model):
    """Options of the local backend only; Vertex AI has no such block."""

    network: Literal["host", "namespaces"] = "host"
    """``host``: every slurmd on this machine's loopback, one port each. ``namespaces``
    (root only): each node in its own network namespace with its own hostname and IP."""
    resource_scale: float = Field(default=1.0, gt=0, le=1)
    """Factor applied to the catalogue's vCPUs and memory when declaring nodes to Slurm
    (``0.125`` declares an a3-highgpu-8g as 26 CPUs and 234 GB). GPU counts are never
    scaled: jobs see the GPU indices they would see on the real machine type."""
    health_check_interval: int = Field(default=0, ge=0, le=86400)
    """Seconds between runs of the node health checks (Slurm's ``HealthCheckInterval``; 0, as
    Slurm's default, runs none). A failed check drains the node with the check as its reason;
    a pass resumes a node only a failed check drained."""
    supervisor: bool = True
    """Run the cluster's supervisor (``backends/supervisor.py``; on by default, ``supervisor:
    false`` leaves failures to Slurm alone): a node whose slurmd crashed is set DOWN within a
    second, so its ``--requeue`` jobs run again on the other nodes at once; a node a health
    check drained has its jobs requeued; then each goes up the ladder (restart, reimage,
    replace, give up: ``health/ladder.py``), each step in ``cluster.events()``."""
    slurmd_timeout: int = Field(default=30, ge=5, le=65533)
    """Slurm's ``SlurmdTimeout``: seconds a silent node has before slurmctld sets it DOWN and
    requeues its jobs. Slurm's default is 300; local clusters take 30. The supervisor sees a
    crashed or cut-off node within seconds, whatever this is."""
    cred_expire: int = Field(default=10, ge=5, le=86400)
    """``AuthInfo``'s ``cred_expire``: how long a job's credential is good, and how long Slurm
    holds a requeued job before it may start again (this + 1 s). Slurm's default is 120, its
    least 5. The supervisor lets the jobs of a node that failed start at once, whatever this is."""
    supervisor_cooldown: float = Field(default=30.0, ge=0, le=3600)
    """Seconds the supervisor waits between two remediations of one node, so a node that fails
    again at once is not restarted in a loop."""
    supervisor_window: float = Field(default=600.0, gt=0, le=86400)
    """Seconds over which a node's remediations count against their limits (3 restarts, 1
    reimage, 1 replace); when none is left the supervisor gives up on the node."""
    slurm_rest_api: bool = False
    """Let Slurm's REST API (slurmrestd, JWT) act on the cluster: a JWT key in its folder and
    ``AuthAltTypes=auth/jwt`` (``backends/slurm_rest.py``). The local Vertex endpoint sets it on
    the training clusters it creates, for their Slurm Job API (``callSlurmRestApi``)."""


class ClusterSpec(_Model):
    display_name: str
    node_pools: list[NodePool] = Field(min_length=1)
    orchestrator_spec: OrchestratorSpec
    network: Network | None = None
    runtime_spec: RuntimeSpec | None = None
    description: str | None = None
    labels: dict[str, str] = {}
    local: LocalOptions = LocalOptions()

    @property
    def name(self) -> str:
        return self.display_name

    @property
    def slurm(self) -> SlurmSpec:
        return self.orchestrator_spec.slurm_spec

    def pool(self, pool_id: str) -> NodePool:
        for pool in self.node_pools:
            if pool.id == pool_id:
                return pool
        raise KeyError(pool_id)

    def compute_pools(self) -> list[NodePool]:
        """Pools whose nodes run jobs: every pool but the login pool."""
        return [p for p in self.node_pools if p.id != self.slurm.login_node_pool_id]

    def with_pool_size(self, pool_id: str, nodes: int) -> "ClusterSpec":
        """A copy of this spec with ``pool_id`` scaled to ``nodes`` nodes."""
        data = self.to_json()
        for pool in data["node_pools"]:
            if pool["id"] == pool_id:
                pool["scaling_spec"] = {"min_node_count": nodes, "max_node_count": nodes}
        return parse_cluster_spec(data)

    def to_json(self) -> dict[str, Any]:
        """snake_case JSON, as stored in the state store and returned by the REST API."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_vertex(self) -> dict[str, Any]:
        """The camelCase body of a Vertex ``ModelDevelopmentCluster``: no local options, and no
        ``accounting``, which Vertex has no field for (its clusters keep their own)."""
        body = self.model_dump(mode="json", exclude_none=True, by_alias=True, exclude={"local"})
        body["orchestratorSpec"]["slurmSpec"].pop("accounting", None)
        return body


def load_cluster_spec(path: str | Path) -> ClusterSpec:
    """Read a spec from a .json, .yaml or .yml file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SpecError("file", str(path), f"it could not be read ({e.strerror})") from None
    return parse_cluster_spec(parse_spec_text(text, source=str(path)))


# A spec is a page of text, scripts included; a bigger one is a mistake or an attack.
MAX_SPEC_BYTES = 1024 * 1024


def parse_spec_text(text: str, source: str = "spec") -> Any:
    """JSON or YAML text to plain data (YAML is a superset of JSON), without YAML's aliases:
    a 678-byte spec of nested ``*alias`` references expanded to 286 MB (a "billion laughs"),
    and a spec never needs one (write the value again)."""
    import yaml

    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(source, f"{len(text)} characters", f"a spec may hold at most {MAX_SPEC_BYTES} characters")
    try:
        return yaml.load(text, Loader=_loader_without_aliases())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError(source, text[:40] + ("..." if len(text) > 40 else ""),
                        f"it must be JSON or YAML; parsing failed{where}: {getattr(e, 'problem', e)}") from None


@functools.cache
def _loader_without_aliases():
    import yaml

    class LoaderWithoutAliases(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                alias = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, f"YAML aliases (*{alias.anchor}) are not accepted in a spec: write the value "
                    f"again where it is needed", alias.start_mark)
            return super().compose_node(parent, index)

    return LoaderWithoutAliases


def parse_cluster_spec(data: Any, display_name: str | None = None) -> ClusterSpec:
    """Validate ``data`` (a dict, or JSON/YAML text) into a ``ClusterSpec``; ``display_name``,
    when given, replaces the spec's own."""
    if isinstance(data, (str, bytes)):
        data = parse_spec_text(data.decode() if isinstance(data, bytes) else data)
    if display_name is not None and isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in ("display_name", "displayName")}
        data["display_name"] = display_name
    if not isinstance(data, dict):
        raise SpecErrors([SpecError("(spec)", data, "a cluster spec is an object with display_name, node_pools and orchestrator_spec")])
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as e:
        raise SpecErrors(spec_errors(e.errors(), ClusterSpec)) from None
    errors = _check_semantics(spec)
    if errors:
        raise SpecErrors(errors)
    return spec


def _check_semantics(spec: ClusterSpec) -> list[SpecError]:
    """Rules that involve a catalogue or more than one field."""
    errors: list[SpecError] = []
    if not DISPLAY_NAME_RE.fullmatch(spec.display_name):
        errors.append(SpecError("display_name", spec.display_name,
                                "use 1 to 10 lowercase letters, digits or hyphens, starting with a letter"))
    pool_ids = [p.id for p in spec.node_pools]
    errors += _check_ids(pool_ids, "node_pools", "pool")
    for i, pool in enumerate(spec.node_pools):
        where = f"node_pools[{i}]"
        errors += _check_machine(pool.machine_spec, f"{where}.machine_spec")
        scaling = pool.scaling_spec
        if scaling.min_node_count != scaling.max_node_count:
            errors.append(SpecError(f"{where}.scaling_spec.max_node_count", scaling.max_node_count,
                                    f"training clusters have a fixed size: set min_node_count and "
                                    f"max_node_count both to {scaling.min_node_count} (or both to the size you want)"))
    slurm = spec.slurm
    login = slurm.login_node_pool_id
    if login is not None and login not in pool_ids:
        errors.append(SpecError("orchestrator_spec.slurm_spec.login_node_pool_id", login,
                                f"it must name one of the node pools: {', '.join(pool_ids)}"))
    errors += _check_ids([p.id for p in slurm.partitions], "orchestrator_spec.slurm_spec.partitions", "partition")
    for i, part in enumerate(slurm.partitions):
        where = f"orchestrator_spec.slurm_spec.partitions[{i}]"
        for j, pool_id in enumerate(part.node_pool_ids):
            if pool_id not in pool_ids:
                errors.append(SpecError(f"{where}.node_pool_ids[{j}]", pool_id,
                                        f"it must name one of the node pools: {', '.join(pool_ids)}"))
            elif pool_id == login:
                errors.append(SpecError(f"{where}.node_pool_ids[{j}]", pool_id,
                                        "the login pool runs no jobs; list only compute pools in partitions"))
    errors += _check_storage(spec)
    errors += _check_scheduling(slurm.scheduling)
    return errors


def _check_storage(spec: ClusterSpec) -> list[SpecError]:
    """Mount paths are absolute, normalized folders other than /, one storage per path on a pool."""
    errors = []
    for i, pool in enumerate(spec.node_pools):
        seen = {"/home": "orchestrator_spec.slurm_spec.home_directory_storage"} if spec.slurm.home_directory_storage else {}
        for kind, items in (("filestores", pool.filestores), ("lustres", pool.lustres)):
            for j, item in enumerate(items):
                path, where = item.mount_path, f"node_pools[{i}].{kind}[{j}].mount_path"
                if path is None:
                    continue
                if not path.startswith("/") or posixpath.normpath(path) != path or path == "/":
                    errors.append(SpecError(where, path, "an absolute path of a folder other than /, without "
                                                         "'.', '..', '//' or a trailing '/' (e.g. /mnt/data)"))
                elif path in seen:
                    errors.append(SpecError(where, path, f"{seen[path]} is mounted there already; "
                                                         "give each storage of a pool its own mount path"))
                seen.setdefault(path, where)
    return errors


def _check_scheduling(scheduling: Scheduling | None) -> list[SpecError]:
    if scheduling is None:
        return []
    errors, where = [], "orchestrator_spec.slurm_spec.scheduling"
    mode = scheduling.preempt_mode
    if mode is not None and not all(m.upper() in PREEMPT_MODES for m in mode.split(",")):
        errors.append(SpecError(f"{where}.preempt_mode", mode,
                                f"comma-separated modes from {', '.join(PREEMPT_MODES)} (e.g. REQUEUE or SUSPEND,GANG)"))
    exempt = scheduling.preempt_exempt_time
    if exempt is not None and not SLURM_TIME_RE.fullmatch(exempt):
        errors.append(SpecError(f"{where}.preempt_exempt_time", exempt,
                                "a time as Slurm writes it: minutes, [hours:]minutes:seconds or days-hours[:minutes[:seconds]]"))
    return errors


def _check_ids(ids: list[str], where: str, kind: str) -> list[SpecError]:
    """Ids become Slurm names and file names: each must be well formed and unique."""
    errors, seen = [], set()
    for i, id_ in enumerate(ids):
        if not ID_RE.fullmatch(id_):
            errors.append(SpecError(f"{where}[{i}].id", id_, ID_RULE))
        if id_ in seen:
            errors.append(SpecError(f"{where}[{i}].id", id_, f"{kind} ids must be unique"))
        seen.add(id_)
    return errors


def _check_machine(ms: MachineSpec, where: str) -> list[SpecError]:
    machine = machines.lookup(ms.machine_type)
    if machine is None:
        family = ms.machine_type.rsplit("-", 1)[0]
        close = sorted(n for n in machines.MACHINE_TYPES if n.startswith(family)) or sorted(
            n for n in machines.MACHINE_TYPES if "gpu" in n)
        return [SpecError(f"{where}.machine_type", ms.machine_type,
                          f"known machine types include: {', '.join(close[:12])}")]
    errors = []
    if ms.accelerator_type is not None and ms.accelerator_type != machine.gpu_type:
        expected = (f"{machine.name} comes with {machine.gpu_type}" if machine.gpu_type
                    else f"{machine.name} has no accelerators; remove accelerator_type")
        errors.append(SpecError(f"{where}.accelerator_type", ms.accelerator_type, expected))
    if ms.accelerator_count is not None and ms.accelerator_count != machine.gpu_count:
        errors.append(SpecError(f"{where}.accelerator_count", ms.accelerator_count,
                                f"{machine.name} has exactly {machine.gpu_count} GPU(s)"))
    return errors


def spec_differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Field paths where two spec JSONs differ; lists of objects with ids (pools,
    partitions) are matched by id, so ``node_pools[gpu].machine_spec.machine_type``."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = dict.fromkeys([*old, *new])
        return [d for k in keys for d in spec_differences(old.get(k), new.get(k), f"{path}.{k}" if path else k)]
    old_ids, new_ids = _by_id(old), _by_id(new)
    if old_ids is not None and new_ids is not None:
        ids = dict.fromkeys([*old_ids, *new_ids])
        return [d for i in ids for d in spec_differences(old_ids.get(i), new_ids.get(i), f"{path}[{i}]")]
    return [] if old == new else [path]


def _by_id(value: Any) -> dict[str, Any] | None:
    if isinstance(value, list) and all(isinstance(v, dict) and "id" in v for v in value):
        return {v["id"]: v for v in value}
    return None
