"""Render slurm.conf, gres.conf and the prolog/epilog wrappers for a cluster. Pure functions:
a ``SlurmLayout`` in, text out, so they are tested without any daemon."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..spec.job import APPENDED_OUTPUT_ENV, ATTEMPT_NOTE

# Slurm's config parser splits on whitespace and treats '#' as a comment; paths we write
# into slurm.conf must not contain either (checked where the cluster directory is chosen).
UNSAFE_IN_CONF = set(" \t\n#\"'=")


@dataclass(frozen=True)
class NodeDecl:
    """One Slurm node as slurm.conf declares it."""

    name: str
    addr: str
    hostname: str
    port: int
    cpus: int
    memory_mb: int
    gpus: int = 0
    gpu_type: str | None = None
    gpu_files: tuple[str, ...] = ()  # one device path per GPU


@dataclass(frozen=True)
class PartitionDecl:
    name: str
    nodes: tuple[str, ...]
    default: bool = False


@dataclass(frozen=True)
class SlurmLayout:
    """Everything slurm.conf needs to know about one cluster."""

    cluster_name: str
    root: Path  # the cluster's directory; every file of the cluster lives under it
    controller_host: str
    controller_addr: str
    controller_port: int
    munge_socket: Path
    nodes: tuple[NodeDecl, ...]
    partitions: tuple[PartitionDecl, ...]
    has_prolog: bool = False
    has_epilog: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    # The user every daemon runs as. Anyone but root means a cluster only that user may
    # submit to (a slurmd that is not root cannot start a job as anyone else), which
    # etc/job_submit.lua enforces (render_job_submit_lua).
    slurm_user: str = "root"
    # Seconds between runs of etc/health_check.sh (render_health_check) on every node; 0: none.
    health_check_interval: int = 0
    slurmd_timeout: int = 30  # Slurm's default is 300: a crashed node is DOWN after this without a supervisor
    cred_expire: int = 10     # Slurm's default is 120: a requeued job waits this + 1 s to start

    @property
    def etc(self) -> Path:
        return self.root / "etc"


def render_slurm_conf(layout: SlurmLayout) -> str:
    r = layout.root
    lines = [
        "# Written by jupyter_gtc; changes here are overwritten when the cluster is scaled.",
        f"ClusterName={layout.cluster_name}",
        f"SlurmctldHost={layout.controller_host}({layout.controller_addr})",
        f"SlurmctldPort={layout.controller_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # A short credential lifetime lets a requeued job start again in seconds, not minutes.
        f"AuthInfo=socket={layout.munge_socket},cred_expire={layout.cred_expire}",
        f"SlurmUser={layout.slurm_user}",
        f"SlurmdUser={layout.slurm_user}",
        f"StateSaveLocation={r}/state",
        f"SlurmdSpoolDir={r}/spool/%n",
        f"SlurmctldPidFile={r}/run/slurmctld.pid",
        f"SlurmdPidFile={r}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={r}/log/slurmctld.log",
        f"SlurmdLogFile={r}/log/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # linuxproc finds a job's processes through /proc; each node's daemons run in their
        # own PID namespace with its own /proc, so one kill ends a node and all its jobs.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        # Without a default, each job would take all of a node's memory and jobs would
        # run one at a time.
        "DefMemPerCPU=1024",
        # Nodes declare the sizes of the machine type they stand for, not of this machine.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "MailProg=/bin/true",
        f"SlurmdTimeout={layout.slurmd_timeout}",
        # How long a cancelled or requeued job has between SIGTERM and SIGKILL (default 30 s).
        # linuxproc does not signal a process still named slurmstepd (kill_tree.c), so a job
        # cancelled in the instant between a task's fork and its exec misses the SIGTERM and
        # runs, its node held, until the SIGKILL: then a cancel takes this long.
        "KillWait=10",
        "SchedulerParameters=bf_interval=1",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={r}/log/jobcomp.txt",
        "GresTypes=gpu",
        "MpiDefault=none",
    ]
    if layout.slurm_user != "root":
        lines.append("JobSubmitPlugins=lua")  # reads etc/job_submit.lua, next to slurm.conf
    lines.append(f"TaskProlog={layout.etc}/task_prolog.sh")
    if layout.has_prolog:
        lines.append(f"Prolog={layout.etc}/prolog.sh")
    if layout.has_epilog:
        lines.append(f"Epilog={layout.etc}/epilog.sh")
    if layout.health_check_interval:
        lines += [f"HealthCheckProgram={layout.etc}/health_check.sh",
                  f"HealthCheckInterval={layout.health_check_interval}", "HealthCheckNodeState=ANY"]
    lines += [f"{k}={v}" for k, v in sorted(layout.extra.items())]
    lines.append("")
    for n in layout.nodes:
        lines.append(render_node_line(n))
    lines.append("")
    for p in layout.partitions:
        nodes = ",".join(p.nodes)
        default = "YES" if p.default else "NO"
        lines.append(f"PartitionName={p.name} Nodes={nodes} Default={default} MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def render_node_line(n: NodeDecl, state: str = "UNKNOWN") -> str:
    """slurm.conf's line for node ``n``; also what `scontrol create` takes (with State=FUTURE)."""
    gres = f" Gres=gpu:{n.gpu_type}:{n.gpus}" if n.gpus and n.gpu_type else (f" Gres=gpu:{n.gpus}" if n.gpus else "")
    return (f"NodeName={n.name} NodeHostname={n.hostname} NodeAddr={n.addr} Port={n.port} "
            f"CPUs={n.cpus} Boards=1 SocketsPerBoard=1 CoresPerSocket={n.cpus} ThreadsPerCore=1 "
            f"RealMemory={n.memory_mb}{gres} State={state}")


def render_gres_conf(layout: SlurmLayout) -> str:
    lines = ["# Written by jupyter_gtc.", "AutoDetect=off"]
    for n in layout.nodes:
        if not n.gpus:
            continue
        type_part = f" Type={n.gpu_type}" if n.gpu_type else ""
        for path in n.gpu_files:
            lines.append(f"NodeName={n.name} Name=gpu{type_part} File={path}")
    return "\n".join(lines) + "\n"


_TASK_PROLOG = r"""#!/bin/bash
# Written by jupyter_gtc: CLOUD_ML_JOB_ID and CLUSTER_SPEC, as Vertex AI sets them.
echo "export CLOUD_ML_JOB_ID=$SLURM_JOB_ID"
hosts=$(SLURM_CONF=@SLURM_CONF@ scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null)
chief="" workers="" i=0
for h in $hosts; do
  if [ $i -eq 0 ]; then chief="\"$h:2222\""; else workers="$workers${workers:+,}\"$h:2222\""; fi
  i=$((i + 1))
done
node=${SLURM_NODEID:-0}
if [ "$node" -eq 0 ]; then type=workerpool0 index=0; else type=workerpool1 index=$((node - 1)); fi
pools="\"workerpool0\":[$chief]"
[ -n "$workers" ] && pools="$pools,\"workerpool1\":[$workers]"
echo "export CLUSTER_SPEC={\"cluster\":{$pools},\"environment\":\"cloud\",\"task\":{\"type\":\"$type\",\"index\":$index},\"job\":{\"slurm_job_id\":\"$SLURM_JOB_ID\"}}"
# The batch script's own task (it has no step id) of a requeued job that jupyter_gtc submitted
# with its output appended to (@APPENDED@=1): a line in its output, below the earlier attempts'.
# Slurm truncated any other job's output, so it gets none. The variable is dropped from the task,
# so a job submitted from inside this one does not inherit it.
if [ -n "${@APPENDED@:-}" ]; then
  if [ "$@APPENDED@" = 1 ] && [ -n "${SLURM_RESTART_COUNT:-}" ] && [ -z "${SLURM_STEP_ID:-}" ]; then
    echo "print @ATTEMPT_NOTE@"
  fi
  echo "unset @APPENDED@"
fi
"""


def render_health_check(python: str, slurm_conf: Path, fault_root: Path, record_dir: Path,
                        paths: tuple[str, ...], budget: float = 10.0) -> str:
    """Slurm's HealthCheckProgram for a local cluster: slurmd runs it as the node (its
    SLURMD_NODENAME set) at start and every HealthCheckInterval. The node's checks within
    ``budget`` seconds (health/node.py); a failure drains the node naming the check, a pass
    resumes a node only a failure drained. Faults are read from the node's own folder under
    ``fault_root``: only a local cluster's health checks have one."""
    words = [_sh_quote(python), "-m", "jupyter_gtc.health.node", "--slurm", "--budget", f"{budget:g}",
             "--record", _sh_quote(str(record_dir))] + [f"--path {_sh_quote(p)}" for p in paths]
    return (
        "#!/bin/bash\n"
        "# Written by jupyter_gtc: the node health checks, as Slurm's HealthCheckProgram.\n"
        f"export SLURM_CONF={_sh_quote(str(slurm_conf))}\n"
        f'export GTC_FAULT_DIR={_sh_quote(str(fault_root))}/"$SLURMD_NODENAME"\n'
        f"exec {' '.join(words)} > /dev/null\n"
    )


def render_task_prolog(slurm_conf: Path) -> str:
    """Slurm runs this before every task and sets each ``export K=V`` line it prints in the
    task's environment: the parts of the Vertex AI job contract only known at run time."""
    return (_TASK_PROLOG.replace("@SLURM_CONF@", _sh_quote(str(slurm_conf))).replace("@ATTEMPT_NOTE@", ATTEMPT_NOTE)
            .replace("@APPENDED@", APPENDED_OUTPUT_ENV))


_JOB_SUBMIT_LUA = """-- Written by jupyter_gtc. Every daemon of this cluster runs as @NAME@ (uid @UID@), not as
-- root, so a job of anyone else would fail at launch or, worse, run as @NAME@: refuse it at
-- submit (sbatch, srun, salloc), with a message that says what to do.
-- A Lua error here lets the job through, so this stays as plain as it can be.
function slurm_job_submit(job_desc, part_list, submit_uid)
  if submit_uid == @UID@ then
    return slurm.SUCCESS
  end
  slurm.log_user(@MESSAGE@ .. submit_uid .. @FIX@)
  return slurm.ERROR
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
"""


def render_job_submit_lua(uid: int, name: str) -> str:
    """The cluster's job_submit.lua when its daemons run as ``name`` (``uid``): jobs of any
    other uid are refused at submit, naming the owner."""
    message = (f"this cluster's Slurm runs as user {name} (uid {uid}), not as root, so only {name} "
               "can submit jobs to it; you are uid ")
    fix = f". Submit as {name}, or create a cluster of your own"
    return (_JOB_SUBMIT_LUA.replace("@NAME@", name).replace("@UID@", str(int(uid)))
            .replace("@MESSAGE@", _lua_quote(message)).replace("@FIX@", _lua_quote(fix)))


def _lua_quote(text: str) -> str:
    """A Lua string literal of ``text`` that slurm.log_user's format() prints as it is."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("%", "%%")
    return f'"{escaped}"'


def render_script_chain(scripts: list[Path]) -> str:
    """A prolog/epilog that runs each of the spec's scripts in order and fails on the first
    failure, which is what Slurm does with a node whose prolog fails (drains it)."""
    body = "\n".join(f"{_sh_quote(str(s))} || exit $?" for s in scripts)
    return f"#!/bin/bash\n# Written by jupyter_gtc: runs the cluster spec's scripts in order.\n{body}\nexit 0\n"


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@dataclass(frozen=True)
class AccountingLayout:
    """A cluster's accounting: slurmdbd, and the MariaDB it keeps its tables in."""

    root: Path            # the cluster's directory
    dbd_host: str         # slurmdbd's host name (it refuses to start on another host)
    dbd_addr: str         # where slurmctld and clients (sacct, sacctmgr) reach it
    dbd_port: int
    db_port: int          # MariaDB's, on 127.0.0.1 only
    slurm_user: str
    munge_socket: Path
    db_user: str = "slurm"
    db_name: str = "slurm_acct_db"
    # Where slurmctld and clients reach slurmdbd through the cluster's relay (dbd_relay.py:
    # without it each message waits 40 ms for a delayed ACK); None: at dbd_port itself.
    relay_port: int | None = None
    # The cluster's JWT key, where it serves Slurm's REST API (backends/slurm_rest.py); None: munge only.
    jwt_key: str | None = None


def render_slurmdbd_conf(layout: AccountingLayout, db_password: str) -> str:
    """slurmdbd.conf, which slurmdbd wants owned by SlurmUser with mode 0600: it holds the
    database's password (a fresh one at every start of the cluster; nowhere else)."""
    r = layout.root
    return "\n".join([
        "# Written by jupyter_gtc at every start of the cluster's accounting.",
        "AuthType=auth/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        f"DbdHost={layout.dbd_host}",
        f"DbdAddr={layout.dbd_addr}",
        f"DbdPort={layout.dbd_port}",
        f"SlurmUser={layout.slurm_user}",
        f"PidFile={r}/run/slurmdbd.pid",
        f"LogFile={r}/log/slurmdbd.log",
        "DebugLevel=info",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={layout.db_port}",
        f"StorageUser={layout.db_user}",
        f"StoragePass={db_password}",
        f"StorageLoc={layout.db_name}",
        *([f"AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={layout.jwt_key}"] if layout.jwt_key else []),
    ]) + "\n"


def accounting_slurm_conf(layout: AccountingLayout) -> dict[str, str]:
    """The slurm.conf lines that send jobs' records to the cluster's slurmdbd (through its
    relay, where it has one)."""
    return {
        "AccountingStorageType": "accounting_storage/slurmdbd",
        "AccountingStorageHost": layout.dbd_addr,
        "AccountingStoragePort": str(layout.relay_port or layout.dbd_port),
        # Not a password with munge: the socket of the munged that signs messages to slurmdbd
        # (slurm.conf(5)); without it, they go to the machine's default munged.
        "AccountingStoragePass": str(layout.munge_socket),
        # Per-step CPU and memory figures in sacct, as a site's cluster has them.
        "JobAcctGatherType": "jobacct_gather/linux",
        "JobAcctGatherFrequency": "30",
    }
