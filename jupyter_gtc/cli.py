"""``gtc``: the command-line front end. Parses arguments, calls ``api``, prints.

Every verb calls the ``api`` function of the same name; errors print one message and
exit with status 1 (2 for usage errors, as argparse does). Ctrl-C (SIGINT) and SIGTERM end
any verb, cleaning up on the way out, with status 130 and 143.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

from . import api
from .exceptions import GtcError, GtcWarning, SpecError


# A 2-node A3 cluster's spec, shipped in the package so the hint works from a wheel too
# (examples/clusters/local-a3.yaml in a clone is a link to it).
EXAMPLE_SPEC = Path(__file__).parent / "examples" / "clusters" / "local-a3.yaml"

def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    # `gtc job submit FILE [sbatch options]` passes options it does not know on to sbatch;
    # every other verb refuses them as usual.
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passes_options_on", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    restore = _end_on_signals()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", GtcWarning)
            warnings.showwarning = _print_warning
            args.func(args)
    except GtcError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print("terminated" if isinstance(e, Terminated) else "interrupted", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)
    finally:
        restore()
    return 0


def _print_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A ``GtcWarning`` (a job that runs in its job folder, not where it was submitted from) as
    one line, ``warning: ...``, as errors are printed; any other as Python prints it."""
    if issubclass(category, GtcWarning):
        print(f"warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is, so that every clean-up on the way out runs (a verb's
    ``finally``: a TensorBoard child stopped, a study left to resume)."""


def _end_on_signals():
    """Make SIGINT and SIGTERM raise in the main thread; returns what puts the old handlers back.

    Python turns SIGINT into ``KeyboardInterrupt`` only when it starts with SIGINT at its
    default. A process started from a background job (``make test &``, a CI runner without a
    tty, ``nohup``-like wrappers) inherits SIGINT *ignored*, and then Ctrl-C and ``kill -INT``
    did nothing: ``gtc job tensorboard`` ran on with its TensorBoard for as long as nobody
    sent SIGKILL. SIGTERM's default ends the process without running any ``finally``, which
    left the TensorBoard child behind. So both get a handler of our own, whatever we inherited.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # signal handlers can only be set from the main thread

    def terminate(signum, frame):
        raise Terminated()

    old = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
           signal.SIGTERM: signal.signal(signal.SIGTERM, terminate)}

    def restore() -> None:
        for signum, handler in old.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

    return restore


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gtc", description="Slurm training clusters, locally or on Google Cloud.")
    verbs = p.add_subparsers(title="commands", metavar="COMMAND")

    cluster = verbs.add_parser("cluster", help="create, inspect, scale and delete clusters")
    cv = cluster.add_subparsers(title="cluster commands", metavar="VERB")

    create = cv.add_parser("create", help="create a cluster from a training-cluster spec (JSON or YAML)")
    create.add_argument("-f", "--file", required=True, help="spec file, e.g. examples/clusters/local-a3.yaml")
    create.add_argument("--backend", default="local", help="where the cluster runs (default: local)")
    create.add_argument("--json", action="store_true", help="print the cluster as JSON")
    create.set_defaults(func=_create)

    lst = cv.add_parser("list", help="all clusters: name, backend, state, nodes, GPUs, age")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_list)

    describe = cv.add_parser("describe", help="pools, partitions and nodes with state and reason")
    describe.add_argument("name")
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(func=_describe)

    scale = cv.add_parser("scale", help="resize a node pool; jobs on nodes that stay keep running")
    scale.add_argument("name")
    scale.add_argument("--pool", required=True)
    scale.add_argument("--nodes", required=True, type=int)
    scale.set_defaults(func=_scale)

    env = cv.add_parser("env", help="print `export` lines so sinfo/squeue/sbatch use this cluster")
    env.add_argument("name")
    env.set_defaults(func=_env)

    delete = cv.add_parser("delete", help="cancel jobs, stop every process, remove the cluster's files")
    delete.add_argument("name")
    delete.set_defaults(func=_delete)

    attach = cv.add_parser("attach", help="attach a Slurm cluster that exists (over SSH, or this machine's own); "
                                          "nothing on it is created or changed")
    attach.add_argument("name", help="the name jupyter_gtc gives it")
    attach.add_argument("--ssh", metavar="[USER@]HOST", help="its login node, or an alias of ~/.ssh/config; "
                                                              "without it: the cluster this machine is a client of")
    attach.add_argument("--port", type=int, help="the login node's SSH port")
    attach.add_argument("--python", help="the cluster's Python for jobs, e.g. /shared/envs/train/bin/python")
    attach.add_argument("--jobs-root", dest="jobs_root", help="where job folders go on the cluster "
                                                              "(default ~/jupyter_gtc/jobs)")
    attach.add_argument("--slurm-conf", dest="slurm_conf", help="SLURM_CONF for its commands, where not the default")
    attach.add_argument("-f", "--file", help="an attach spec (YAML or JSON) instead of the options above")
    attach.add_argument("--json", action="store_true", help="print the cluster as JSON")
    attach.set_defaults(func=_attach)

    connect = cv.add_parser("connect", help="open the SSH connection to a login node here, answering its password "
                                            "or second-factor prompt once; everything then reuses it")
    connect.add_argument("target", metavar="NAME|[USER@]HOST", help="an attached cluster, or a login node to attach")
    connect.add_argument("--port", type=int)
    connect.add_argument("--ssh-config", dest="ssh_config", help="an ssh config file instead of ~/.ssh/config")
    connect.set_defaults(func=_connect)

    detach = cv.add_parser("detach", help="forget an attached cluster; its jobs keep running, their folders stay")
    detach.add_argument("name")
    detach.set_defaults(func=_detach)

    health = cv.add_parser("health", help="each node's health checks (ECC, XID, speed, correctness, disk): "
                                          "verdict and evidence, with Slurm's state and drain reason")
    health.add_argument("name")
    health.add_argument("--last", action="store_true", help="the last run of the HealthCheckProgram, not a new one")
    health.add_argument("--json", action="store_true")
    health.set_defaults(func=_health)

    fault = cv.add_parser("fault", help="local clusters, for testing: inject a fault into a node")
    fault.add_argument("name")
    fault.add_argument("node")
    fault.add_argument("fault", help="ecc, xid, slow, disk_full, hang (its checks see it), crash (its slurmd stops) or partition (its link goes down; namespace-mode nodes)")
    fault.add_argument("--clear", action="store_true", help="take the fault away again (crash: start its slurmd again; partition: its link up)")
    fault.set_defaults(func=_fault)

    events = cv.add_parser("events", help="the cluster's History: what its supervisor (or, on Vertex AI, the "
                                          "service: drains, replacements) noticed and did to its nodes")
    events.add_argument("name")
    events.add_argument("--json", action="store_true")
    events.set_defaults(func=_events)

    report = cv.add_parser("report-faulty", help="Vertex AI training clusters: report a node faulty "
                                                 "(reportFaultyNodes): Vertex deletes it and makes it again, or, "
                                                 "with --behavior and --reason, repairs its physical host")
    report.add_argument("name")
    report.add_argument("node", help="the node, as `gtc cluster describe` lists it (or Vertex's CLUSTER-POOL-INDEX)")
    report.add_argument("--behavior", help="report its host: PERFORMANCE, SILENT_DATA_CORRUPTION, "
                                           "UNRECOVERABLE_GPU_ERROR or BEHAVIOR_UNSPECIFIED (with --reason)")
    report.add_argument("--reason", help="what was seen (with --behavior), e.g. 'slow all-reduce'")
    report.set_defaults(func=_report_faulty)

    job = verbs.add_parser("job", help="submit, list, follow and cancel jobs")
    jv = job.add_subparsers(title="job commands", metavar="VERB")

    submit = jv.add_parser(
        "submit", usage="gtc job submit FILE [--cluster C] [--backend vertex] [--wait] [--python-env PATH|none] "
                        "[SBATCH OPTION ...]",
        help="submit an sbatch script; other options go to sbatch and win over its #SBATCH lines",
        epilog="The job runs in this directory, as sbatch's do (--chdir chooses another); where the cluster "
               "lacks it (attached over SSH), in its job folder, with a warning. "
               "Example: gtc job submit examples/jobs/hello.sbatch --nodes 2 --gpus-per-node 2")
    submit.add_argument("file", help="sbatch script, e.g. examples/jobs/hello.sbatch")
    submit.add_argument("--cluster", help="the cluster (default: the only one)")
    submit.add_argument("--wait", action="store_true", help="wait for the job to finish, then print its log")
    submit.add_argument("--backend", choices=["vertex"],
                        help="vertex: a Vertex AI CustomJob (--machine-type T, --replicas N, --image I) on the Vertex "
                             "target (--cluster; default: the one attached, else one from `gtc config`)")
    submit.add_argument("--python-env", dest="python_env", metavar="PATH|none",
                        help="the Python environment first on the job's PATH (a venv or conda folder); 'none' "
                             "leaves sbatch's PATH as it is; default: $GTC_JOB_PYTHON_ENV, else gtc's own")
    submit.set_defaults(func=_job_submit, passes_options_on=True)

    jlist = jv.add_parser("list", help="every job of the clusters, newest first: ours, and others' (a terminal's "
                                       "sbatch) that Slurm knows, OURS=no")
    jlist.add_argument("--cluster")
    jlist.add_argument("--json", action="store_true")
    jlist.set_defaults(func=_job_list)

    logs = jv.add_parser("logs", help="print a job's output; -f follows it until the job ends")
    logs.add_argument("job", help="Slurm job id or job name")
    logs.add_argument("--cluster")
    logs.add_argument("-f", "--follow", action="store_true")
    logs.add_argument("--tail", type=int, help="only the last N lines")
    logs.set_defaults(func=_job_logs)

    board = jv.add_parser("tensorboard", help="run TensorBoard on a job's logs until Ctrl-C")
    board.add_argument("job", help="Slurm job id or job name")
    board.add_argument("--cluster")
    board.set_defaults(func=_job_tensorboard)

    for verb, helptext in (("cancel", "cancel a job"), ("requeue", "put a job back in the queue")):
        p_ = jv.add_parser(verb, help=helptext)
        p_.add_argument("job", help="Slurm job id or job name")
        p_.add_argument("--cluster")
        p_.set_defaults(func=_job_cancel if verb == "cancel" else _job_requeue)

    _add_study_verbs(verbs)
    _add_recipe_verbs(verbs)
    from .cli_models import add_model_verbs  # the registry's verbs live in their own module

    add_model_verbs(verbs)
    from .cli_endpoints import add_endpoint_verbs

    add_endpoint_verbs(verbs)
    from .cli_capacity import add_capacity_verb  # gtc capacity: Compute Engine's view of a zone

    add_capacity_verb(verbs)

    vertex = verbs.add_parser("vertex", help="Vertex AI: a local endpoint the official SDK runs against")
    xv = vertex.add_subparsers(title="vertex commands", metavar="VERB")
    serve = xv.add_parser("serve", help="serve Vertex AI's REST API (CustomJobs) here, running its jobs on a "
                                        "cluster, until Ctrl-C")
    serve.add_argument("--cluster", help="where its jobs run (default: the only cluster)")
    serve.add_argument("--port", type=int, default=8480)
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on; any but loopback needs your own token in $GTC_VERTEX_TOKEN")
    serve.set_defaults(func=_vertex_serve)

    _add_config_verbs(verbs)

    doctor = verbs.add_parser("doctor", help="what is installed or missing, and how to fix it")
    doctor.set_defaults(func=_doctor)
    return p


def _console():
    from rich.console import Console

    return Console(highlight=False)


def _progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def _create(args) -> None:
    started = time.monotonic()
    cluster = api.create_cluster(api.load_cluster_spec(args.file), backend=args.backend, progress=_progress)
    _print_made(cluster, args.json, f"is up ({time.monotonic() - started:.1f} s)")


def _print_made(cluster: api.Cluster, as_json: bool, what: str) -> None:
    """A cluster just created or attached: its JSON, or a line on stderr and its nodes."""
    if as_json:
        print(json.dumps(cluster.to_json(), indent=2))
        return
    print(f"cluster {cluster.name} {what}", file=sys.stderr)
    _print_nodes(cluster)


def _attach(args) -> None:
    if args.file:
        spec = api.parse_spec(api.read_spec_file(args.file), "slurm", display_name=args.name)
    else:
        fields = {k: getattr(args, k) for k in ("python", "jobs_root", "slurm_conf") if getattr(args, k)}
        if args.ssh:
            user, _, host = args.ssh.rpartition("@")
            fields["ssh"] = {"host": host, **({"user": user} if user else {}),
                             **({"port": args.port} if args.port else {})}
        spec = api.parse_spec(fields, "slurm", display_name=args.name)
    _print_made(api.attach_cluster(spec, progress=_progress), args.json, "attached")


def _health(args) -> None:
    rows = api.cluster_health(args.name, now=not args.last)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    checks = [c for c in ("ecc", "xid", "speed", "correctness", "disk") if any(c in r for r in rows)]
    table = Table("NODE", "STATE", *(c.upper() for c in checks), "VERDICT", "EVIDENCE", "REASON", box=None)
    for r in rows:
        table.add_row(r["node"], r["state"], *(r.get(c, "") for c in checks), r["verdict"], r["evidence"], r["reason"])
    _console().print(table)


def _fault(args) -> None:
    api.inject_fault(args.name, args.node, args.fault, clear=args.clear)
    print(f"{args.fault} {'cleared from' if args.clear else 'injected into'} {args.name}/{args.node}")


def _events(args) -> None:
    rows = api.cluster_events(args.name)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    table = Table("TIME", "NODE", "EVENT", "DETAIL", box=None)
    for e in rows:
        table.add_row(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["time"])), e["node"], e["event"],
                      e["detail"])
    _console().print(table)


def _report_faulty(args) -> None:
    api.report_faulty_node(args.name, args.node, reason=args.reason, behavior=args.behavior, progress=_progress)


def _connect(args) -> None:
    status = api.connect_login(args.target, port=args.port, config_file=args.ssh_config)
    if status != 0:
        raise GtcError(f"ssh could not open the connection to {args.target} (exit status {status}); see above")
    print(f"connected to {args.target}; jupyter_gtc reuses the connection until it is idle for 12 h", file=sys.stderr)


def _detach(args) -> None:
    api.detach_cluster(args.name, progress=_progress)
    print(f"cluster {args.name} detached")


def _list(args) -> None:
    clusters = api.list_clusters()
    if args.json:
        print(json.dumps([c.to_json() for c in clusters], indent=2))
        return
    if not clusters:
        print("no clusters yet; create one with `gtc cluster create -f SPEC.yaml` (a spec to start from: "
              f"{EXAMPLE_SPEC}), or attach one with `gtc cluster attach NAME --ssh LOGIN-HOST`")
        return
    from .cli_tables import CLUSTERS, render

    rows = []
    for c in clusters:
        state = c.state if not c.status or c.status.reachable else "UNREACHABLE"
        ready = sum(n.ready for n in c.nodes)
        rows.append([c.name, c.backend, state, f"{ready}/{c.node_count}", str(c.gpu_count), _age(c.created_at)])
    print(render(CLUSTERS, rows))


def _describe(args) -> None:
    cluster = api.get_cluster(args.name)
    if args.json:
        print(json.dumps(cluster.to_json(), indent=2))
        return
    out = _console()
    spec = cluster.spec
    out.print(f"[bold]{cluster.name}[/bold]  backend={cluster.backend}  state={cluster.state}  "
              f"age={_age(cluster.created_at)}")
    if cluster.status:
        for key, value in cluster.status.details.items():
            out.print(f"  {key}: {value}", markup=False, soft_wrap=True)  # paths stay whole, to copy
    where = "locally" if cluster.backend == "local" else f"by the {cluster.backend} backend"
    for item in cluster.not_applied:
        out.print(f"  not applied {where}: {item}", markup=False, soft_wrap=True, style="yellow")
    if cluster.problem:
        out.print(f"  [red]problem:[/red] {cluster.problem}")
    from rich.table import Table

    if cluster.attached:
        parts = Table("PARTITION", "NODES", "GPUS/NODE", box=None, title="partitions", title_justify="left")
        for part in cluster.partitions:
            gpus = sorted(set(part.node_gpus))
            parts.add_row(part.name + ("*" if part.default else ""), str(len(part.nodes)),
                          "-" if gpus in ([], [0]) else "/".join(map(str, gpus)))
        out.print(parts)
        _print_nodes(cluster)
        return
    pools = Table("POOL", "MACHINE TYPE", "GPUS/NODE", "NODES", "ROLE", box=None, title="node pools", title_justify="left")
    for pool in spec.node_pools:
        role = "login" if pool.id == spec.slurm.login_node_pool_id else "compute"
        gpus = f"{pool.machine.gpu_count} x {pool.machine.gpu_model}" if pool.machine.gpu_count else "-"
        pools.add_row(pool.id, pool.machine_spec.machine_type, gpus, str(pool.node_count), role)
    out.print(pools)
    parts = Table("PARTITION", "POOLS", box=None, title="partitions", title_justify="left")
    for part in spec.slurm.partitions:
        parts.add_row(part.id, ", ".join(part.node_pool_ids))
    out.print(parts)
    _print_nodes(cluster)


def _print_nodes(cluster: api.Cluster) -> None:
    from rich.table import Table

    table = Table("NODE", "STATE", "CPUS", "MEMORY", "GPUS", "PARTITIONS", "REASON", box=None,
                  title="nodes", title_justify="left")
    for n in cluster.nodes:
        table.add_row(n.name, n.display_state, f"{n.cpus_allocated}/{n.cpus}",
                      f"{n.memory_allocated_mb // 1024}/{n.memory_mb // 1024} GB",
                      f"{n.gpus_allocated}/{n.gpus}", ",".join(n.partitions), n.reason or "")
    _console().print(table)


def _scale(args) -> None:
    cluster = api.scale_cluster(args.name, args.pool, args.nodes, progress=_progress)
    print(f"pool {args.pool} of {cluster.name} now has {args.nodes} node(s)", file=sys.stderr)
    _print_nodes(cluster)


def _env(args) -> None:
    import shlex

    for key, value in api.cluster_env(args.name).items():
        print(f"export {key}={shlex.quote(value)}")


def _delete(args) -> None:
    api.delete_cluster(args.name, progress=_progress)
    print(f"cluster {args.name} deleted")


def _job_submit(args) -> None:
    from pathlib import Path

    try:
        cluster = api.vertex_cluster(args.cluster) if args.backend == "vertex" else api.resolve_cluster(args.cluster)
        job = api.submit_job(cluster, Path(args.file), args.extra, python_env=args.python_env)  # named after the file
    except SpecError as e:
        if e.field != "python_env":
            raise
        raise SpecError("--python-env", e.value, e.expected) from None
    print(f"submitted job {job.id} ({job.name}) to {job.cluster}; output in {job.job_dir}")
    if args.wait:
        _wait_and_print(job)


def _wait_and_print(job, outcome: str = "") -> None:
    """`--wait`: the job's whole output once it ends (an array's task by task, in task order,
    each under a line naming it); fails unless it COMPLETED."""
    job.wait()
    by_file: dict[object, list[str]] = {}
    for task, path in job.task_logs().items():  # tasks may share a file (an --output without %a)
        by_file.setdefault(path, []).append(task)
    if not by_file:
        sys.stdout.write(job.logs())
    for tasks in by_file.values():
        ends = [f"{t}: {job.tasks[t]['state']} (exit code {job.tasks[t]['exit_code']})" if t in job.tasks else t
                for t in tasks]
        print(f"==> {'task' if len(tasks) == 1 else 'tasks'} {', '.join(ends)} <==")
        text = job.logs(task=tasks[0])
        sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")
    if job.state == "COMPLETED":
        print(f"job {job.id} {job.state} (exit code {job.exit_code}){outcome}")
        return
    print(f"job {job.id} {job.state} (exit code {job.exit_code})")  # no outcome: a failed job made none
    failure = job.failure()  # the line that says why, which the log above may bury
    raise GtcError(f"job {job.id} {failure}" if failure else f"job {job.id} ended {job.state}")


def _job_list(args) -> None:
    jobs = api.list_jobs(args.cluster)
    if args.json:
        print(json.dumps([j.to_json() for j in jobs], indent=2))
        return
    if not jobs:
        where = f" on {args.cluster}" if args.cluster else ""
        print(f"no jobs{where}; submit one with `gtc job submit SCRIPT.sbatch`, or `%%sbatch` in a notebook")
        return
    from .cli_tables import JOBS, render

    rows = []
    for j in jobs:
        elapsed = f"{j.elapsed:.0f}s" if j.elapsed is not None else ""
        rows.append([j.id, j.name, j.cluster, j.user or "", "yes" if j.managed else "no", j.state,
                     "" if j.exit_code is None else str(j.exit_code), j.nodes, elapsed,
                     _age(j.submitted_at) + " ago" if j.submitted_at else ""])
    print(render(JOBS, rows))


def _job_logs(args) -> None:
    job = api.get_job(args.job, args.cluster)
    path = job.log_file()
    if not args.follow and job.host.stat(path) is None:  # say so, rather than print nothing and succeed
        from .failure import no_log

        raise GtcError(no_log(job.id, job.name, job.state, bool(job.nodes), path))
    if not args.follow:
        sys.stdout.write(job.logs(tail=args.tail))
        return
    follower = job.follow()
    if args.tail is not None:
        sys.stdout.write(job.logs(tail=args.tail))
        follower.offset = job.log_path.stat().st_size if job.log_path.exists() else 0
    while True:
        finished = job.finished
        sys.stdout.write(follower.read_new())
        sys.stdout.flush()
        if finished:
            return
        time.sleep(0.5)


def _job_tensorboard(args) -> None:
    board = api.job_tensorboard(args.job, args.cluster)
    print(f"TensorBoard for {board.log_dir} at {board.url} (Ctrl-C stops it)", flush=True)
    try:
        while board.running:
            time.sleep(1)
    finally:
        board.stop()


def _add_config_verbs(verbs) -> None:
    config = verbs.add_parser("config", help="settings: the vertex backend's project, region, staging bucket")
    gv = config.add_subparsers(title="config commands", metavar="VERB")
    get = gv.add_parser("get", help="print a setting (nothing when it is not set)")
    get.add_argument("key", help="e.g. vertex.project")
    get.set_defaults(func=lambda args: print(api.get_config(args.key) or ""))
    set_ = gv.add_parser("set", help="set a setting, checked first",
                         epilog="example: gtc config set vertex.project my-proj")
    set_.add_argument("key")
    set_.add_argument("value")
    set_.set_defaults(func=lambda args: api.set_config(args.key, args.value))
    unset = gv.add_parser("unset", help="forget a setting")
    unset.add_argument("key")
    unset.set_defaults(func=lambda args: api.unset_config(args.key))
    lst = gv.add_parser("list", help="every setting: its value, or '-' when not set, and what it is for")
    lst.set_defaults(func=_config_list)


def _config_list(args) -> None:
    rows = api.list_config()
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        print(f"{r['key']:<{width}}  {r['value'] or '-'}  ({r['help']})")


def _vertex_serve(args) -> None:
    from .vertex_endpoint.server import serve

    cluster = api.resolve_cluster(args.cluster)

    def ready(endpoint, record) -> None:
        print(f"Vertex AI endpoint for cluster {cluster} at http://{endpoint.host}:{endpoint.port}/ (Ctrl-C stops it)\n"
              f"It serves you with no secret; others need its token, in {record} (readable by you only), in "
              f"an Authorization: Bearer header. Point the SDK at it with:\n"
              f"  from jupyter_gtc import api\n"
              f"  aiplatform.init(project=\"local-project\", location=\"us-central1\", api_transport=\"rest\",\n"
              f"                  api_endpoint=api.find_vertex_endpoint({endpoint.port}).api_endpoint,\n"
              f"                  credentials=google.auth.credentials.AnonymousCredentials())\n"
              f"or, in a notebook, %gtc_vertex_local --port {endpoint.port}", flush=True)

    serve(cluster, args.port, args.host, ready=ready)


def _job_cancel(args) -> None:
    job = api.cancel_job(args.job, args.cluster)
    print(f"cancelled job {job.id} ({job.name})")


def _job_requeue(args) -> None:
    job = api.requeue_job(args.job, args.cluster)
    print(f"requeued job {job.id} ({job.name})")


def _doctor(args) -> None:
    rows = api.doctor()
    for check, ok, detail in rows:
        # None: an optional package not installed, which is no failure (its row says the cost).
        print(f"{'ok     ' if ok else 'absent ' if ok is None else 'MISSING'}  {check}: {detail}")
    if any(ok is False for _, ok, _ in rows):
        raise GtcError("some checks failed; see the fixes above (or run `make demo` as root, which installs them)")


def _age(created_at: float) -> str:
    seconds = max(0, int(time.time() - created_at))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# -- recipes ---------------------------------------------------------------------------------


def _add_recipe_verbs(verbs) -> None:
    recipe = verbs.add_parser("recipe", help="the recipe catalogue: pretraining, continued pretraining, SFT, RL")
    rv = recipe.add_subparsers(title="recipe commands", metavar="VERB")
    rlist = rv.add_parser("list", help="every recipe with its configs, machines and run times")
    rlist.set_defaults(func=_recipe_list)
    show = rv.add_parser("show", help="a recipe's configs and the sbatch script it submits")
    show.add_argument("name")
    show.add_argument("--config", default="tiny")
    show.set_defaults(func=_recipe_show)
    run = rv.add_parser(
        "run", help="submit a recipe as a multi-node srun torchrun job; flags it does not know go to the "
        "recipe's program (e.g. --steps 300)")
    run.add_argument("name")
    run.add_argument("--cluster", help="the cluster (default: the only one)")
    run.add_argument("--config", default="tiny", help="the recipe's size (see `gtc recipe list`)")
    run.add_argument("--nodes", type=int, help="nodes (default: the config's)")
    run.add_argument("--init-from", dest="init_from",
                     help="a model folder, job id or recipe to start from (default: the newest run of the "
                          "recipe this one consumes)")
    run.add_argument("--wait", action="store_true", help="wait for the job and print its output")
    run.add_argument("--register", metavar="MODEL", help="the registered model its output becomes a version of "
                     "once the job has completed (default: the recipe's name)")
    run.add_argument("--no-register", dest="no_register", action="store_true", help="do not register its model")
    run.set_defaults(func=_recipe_run, passes_options_on=True)


def _recipe_list(args) -> None:
    from rich.table import Table
    table = Table(box=None)
    for column in ("recipe", "config", "nodes x machine", "starts from", "time"):
        table.add_column(column, no_wrap=column != "time")  # names are what people copy into `gtc recipe run`
    for recipe in api.list_recipes():
        for config in recipe.configs.values():
            table.add_row(recipe.name, config.name, f"{config.nodes} x {config.machine}", recipe.consumes or "-",
                          config.runtime)
    _console().print(table)
    print("notebooks: notebooks/recipes/ (see notebooks/README.md); `gtc recipe show NAME` prints a recipe's script")


def _recipe_show(args) -> None:
    from .recipes.catalogue import recipe_args, render_sbatch
    recipe = api.get_recipe(args.name)
    config = recipe.config(args.config)
    print(f"# {recipe.title}: {recipe.summary} (notebook: notebooks/recipes/{recipe.notebook})")
    print(f"# program flags: {' '.join(recipe_args(recipe, config, '<init-from>' if recipe.consumes else None, []))}")
    print(render_sbatch(recipe, config), end="")


def _recipe_run(args) -> None:
    if args.no_register and args.register:
        raise SpecError("--register", args.register, "give --register MODEL or --no-register, not both")
    job = api.run_recipe(args.name, api.resolve_cluster(args.cluster), args.config, nodes=args.nodes,
                         init_from=args.init_from, args=args.extra,
                         register=False if args.no_register else args.register or True)
    print(f"submitted {args.name} ({args.config}) as job {job.id} to {job.cluster}; output in {job.job_dir}")
    if args.wait:
        _wait_and_print(job, f"; model in {job.model_dir}")
        if not args.no_register:  # the registry's first read after the job ended registers it
            from .cli_models import print_registered

            print_registered(job)


# -- studies ---------------------------------------------------------------------------------


def _add_study_verbs(verbs) -> None:
    study = verbs.add_parser("study", help="hyperparameter tuning studies: each trial a Slurm job")
    sv = study.add_subparsers(title="study commands", metavar="VERB")

    create = sv.add_parser(
        "create", help="start a study from a spec (short YAML form or a Vertex HyperparameterTuningJob) and "
        "drive it until it ends (Ctrl-C leaves its trials running; `gtc study resume` goes on)",
        epilog="the trial script gets the hyperparameters as its arguments: srun python train.py \"$@\"")
    create.add_argument("-f", "--file", required=True, help="the spec, .yaml or .json")
    create.add_argument("--cluster", help="the cluster (default: the only one)")
    create.add_argument("--name", help="the study's name (default: the spec's display_name, or study-<time>)")
    create.add_argument("--metric", help="NAME:minimize or NAME:maximize; wins over the spec's")
    create.add_argument("--trials", type=int, help="max_trial_count; wins over the spec's")
    create.add_argument("--parallel", type=int, help="parallel_trial_count; wins over the spec's")
    create.add_argument("--max-failed", type=int, dest="max_failed", help="max_failed_trial_count")
    create.add_argument("--seed", type=int, help="the sampler's seed")
    create.set_defaults(func=_study_create)

    slist = sv.add_parser("list", help="studies: name, cluster, state, trials, best value")
    slist.add_argument("--cluster")
    slist.add_argument("--json", action="store_true")
    slist.set_defaults(func=_study_list)

    describe = sv.add_parser("describe", help="a study's state, sampler, best trial and every trial")
    describe.add_argument("name")
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(func=_study_describe)

    stop = sv.add_parser("stop", help="stop a study: running trials are cancelled and recorded as stopped early")
    stop.add_argument("name")
    stop.set_defaults(func=_study_stop)

    resume = sv.add_parser("resume", help="drive a study from here again (finished trials kept, running ones "
                           "followed again) until it ends")
    resume.add_argument("name")
    resume.set_defaults(func=_study_resume)

    export = sv.add_parser("export", help="print the study as a Vertex HyperparameterTuningJob (JSON)")
    export.add_argument("name")
    export.add_argument("--image-uri", dest="image_uri", help="the container with the training code (Vertex needs one)")
    export.set_defaults(func=_study_export)


def _study_create(args) -> None:
    spec = api.load_tuning_spec(args.file, metric=args.metric, max_trials=args.trials, parallel=args.parallel,
                                max_failed_trials=args.max_failed, seed=args.seed)
    study = api.create_study(api.resolve_cluster(args.cluster), spec, args.name)
    print(f"study {study.name} on {study.cluster}: {study.sampler}", file=sys.stderr)
    _drive_in_foreground(study)


def _study_resume(args) -> None:
    study = api.resume_study(args.name)
    print(f"driving study {study.name} from here", file=sys.stderr)
    _drive_in_foreground(study)


def _drive_in_foreground(study: api.Study) -> None:
    """Print each trial as it changes state, until the study ends; Ctrl-C leaves it to a later resume."""
    seen: dict[str, str] = {}
    lock = threading.Lock()  # the driver's thread shows snapshots, and this one the last

    def show(snapshot) -> None:
        with lock:
            for t in snapshot.trials:
                if seen.get(t.trial_id) != t.state:
                    seen[t.trial_id] = t.state
                    value = f" {snapshot.metric}={t.value:.6g}" if t.value is not None and t.state != "RUNNING" else ""
                    why = f" ({t.reason})" if t.reason else ""
                    params = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                      for k, v in t.params.items())
                    print(f"trial {t.trial_id:>3} {t.state:<8}{value}  {params}{why}", flush=True)

    unsubscribe = study.subscribe(show)
    try:
        study.wait()
    except KeyboardInterrupt:
        print(f"\nleft study {study.name} running without a driver; `gtc study resume {study.name}` goes on, "
              f"`gtc study stop {study.name}` cancels its trials", file=sys.stderr)
        raise
    finally:
        unsubscribe()
    show(study.snapshot())  # wait() can return before the subscribers hear of the last trial's end
    _print_study_end(study)


def _print_study_end(study: api.Study) -> None:
    best = study.best_trial
    reason = f" ({study.reason})" if study.reason else ""
    print(f"study {study.name} {study.state}{reason}")
    if best is not None:
        print(f"best: trial {best.trial_id} {study.spec.metric.metric_id}={best.value:.6g} {best.params}")
    if study.state == "FAILED":
        raise GtcError(f"study {study.name} failed{reason}")


def _study_list(args) -> None:
    studies = api.list_studies(args.cluster)
    if args.json:
        print(json.dumps([s.to_json() for s in studies], indent=2))
        return
    if not studies:
        where = f" on {args.cluster}" if args.cluster else ""
        print(f"no studies{where}; start one with `gtc study create -f STUDY.yaml`, or `%%gtc_tune` in a notebook")
        return
    from .cli_tables import STUDIES, render

    rows = []
    for s in studies:
        snap = s.snapshot()
        state = snap.state if snap.driven or snap.finished else f"{snap.state} (no driver)"
        best = f"{snap.metric}={snap.best.value:.6g}" if snap.best else ""
        rows.append([s.name, snap.cluster, state, f"{len(snap.trials)}/{snap.max_trials}", best,
                     snap.sampler.split(":")[0]])
    print(render(STUDIES, rows))


def _study_describe(args) -> None:
    study = api.get_study(args.name)
    if args.json:
        print(json.dumps(study.to_json(), indent=2))
        return
    snap = study.snapshot()
    out = _console()
    reason = f" ({snap.reason})" if snap.reason else ""
    out.print(f"[bold]{snap.name}[/bold]  cluster={snap.cluster}  state={snap.state}{reason}  "
              f"metric={snap.metric} ({snap.direction})  sampler={snap.sampler}")
    from rich.table import Table

    names = list(dict.fromkeys(p.parameter_id for p in study.spec.parameters()))
    table = Table("TRIAL", "STATE", *[n.upper() for n in names], "LATEST", snap.metric.upper(), "JOB", "REASON",
                  box=None)
    for t in snap.trials:
        params = [(f"{t.params[n]:.4g}" if isinstance(t.params[n], float) else str(t.params[n]))
                  if n in t.params else "" for n in names]
        table.add_row(t.trial_id, t.state, *params, "" if t.latest is None else f"{t.latest:.6g}",
                      "" if t.value is None else f"{t.value:.6g}", t.job_id or "", t.reason or "")
    out.print(table)


def _study_stop(args) -> None:
    study = api.stop_study(args.name)
    print(f"study {study.name} {study.state}")


def _study_export(args) -> None:
    print(json.dumps(api.get_study(args.name).to_vertex(args.image_uri), indent=2))


if __name__ == "__main__":
    sys.exit(main())
