"""IPython magics: ``%load_ext jupyter_gtc``, then ``%%gtc_cluster``, ``%%sbatch``,
``%squeue``, ``%scancel``, ``%gtc_clusters``, ``%gtc_health``, ``%gtc_fault``, ``%%gtc_tune`` and
``%gtc_vertex_local``.

Each magic parses its arguments, calls ``jupyter_gtc.api`` and returns something that
displays well; what it does is the api's. A ``GtcError`` becomes a ``UsageError`` carrying
the same message, so the user sees one line, not a traceback.

``%%sbatch`` returns the ``api.Job`` itself, so ``job = _`` in the next cell is the job.
Its live panel comes from a display formatter registered for ``api.Job``: any Job that a
cell shows (``api.get_job("12")`` too) is drawn as a ``JobPanel``; likewise ``%%gtc_tune``
returns the ``api.Study``, drawn as a ``StudyPanel``.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display
from IPython.utils.process import arg_split

from . import api
from .exceptions import GtcError, GtcWarning, SpecError


@magics_class
class GtcMagics(Magics):
    def __init__(self, shell):
        super().__init__(shell)
        # The cluster the last magic used: later magics may leave out --cluster.
        self.current_cluster: str | None = None

    @cell_magic
    @magic_arguments()
    @argument("name", nargs="?", help="the cluster's display_name; overrides the spec's own")
    @argument("--backend", default="local", help="where the cluster runs (default: local)")
    def gtc_cluster(self, line: str, cell: str):
        """Create the cluster that the cell's spec (JSON or YAML, as a Vertex AI training
        cluster) describes. If a cluster of that name exists, scale its compute pools to the
        spec's node counts; any other difference is an error. Shows the cluster panel.
        With ``--backend slurm``, attach a Slurm cluster that exists: the cell holds its attach
        spec (``ssh: {host: login.example.org}``, ``python: ...``; empty for the cluster this
        machine is a client of)."""
        from .widgets import ClusterPanel

        args = _parse(self.gtc_cluster, line, cell=True)
        with _usage_errors():
            spec = api.parse_spec(cell, args.backend, display_name=args.name)
            verb = ("updating" if spec.name in _cluster_names() else
                    "attaching" if not isinstance(spec, api.ClusterSpec) else "creating")
            cluster = _with_progress(f"{verb} cluster {spec.name}",
                                     lambda progress: api.apply_cluster_spec(spec, args.backend, progress))
        self.current_cluster = cluster.name
        return ClusterPanel(cluster)

    @cell_magic
    @magic_arguments()
    @argument("--cluster", help="the cluster to submit to; default: the one used last, or the only one")
    @argument("--python-env", dest="python_env", metavar="PATH|none",
              help="the Python environment first on the job's PATH (a venv or conda folder); 'none' leaves "
                   "sbatch's PATH as it is; default: $GTC_JOB_PYTHON_ENV, else this kernel's environment")
    @argument("--hang-timeout", dest="hang_timeout", type=float, metavar="SECONDS",
              help="requeue the job when it writes no log line for this long (the cluster's supervisor does)")
    @argument("--backend", choices=["vertex"],
              help="vertex: run it as a Vertex AI CustomJob (--machine-type T, --replicas N, --image I) on the "
                   "Vertex target (--cluster names one; default: the one attached, else one from gtc config)")
    def sbatch(self, line: str, cell: str):
        """Submit the cell as an sbatch script. Every option other than --cluster, --backend,
        --python-env and --hang-timeout goes to sbatch and wins over the script's #SBATCH lines, e.g.
        ``%%sbatch --nodes 2 --gpus-per-node 2 --job-name pretrain``. The job runs with this
        kernel's Python environment first on its PATH (``python``, ``torchrun`` are the kernel's),
        in the kernel's working directory (a file ``%%writefile`` made is there), as sbatch runs a
        job where it is submitted; ``--chdir`` chooses another folder. Where the cluster lacks the
        kernel's folder (one attached over SSH), it runs in its job folder, and a warning says so.
        Shows the job's live panel; ``job = _`` in the next cell gives the ``api.Job``."""
        # Only --cluster, --python-env and --hang-timeout are ours; everything else is sbatch's, passed on as a
        # list (never through a shell).
        args, options = self.sbatch.parser.parse_known_args(_split(line, "%%sbatch"))
        with _usage_errors():
            cluster = api.vertex_cluster(args.cluster) if args.backend == "vertex" else self._cluster(args.cluster)
            with _option_named("python_env", "--python-env"), _option_named("hang_timeout", "--hang-timeout"):
                job = api.submit_job(cluster, cell, options, python_env=args.python_env,
                                     hang_timeout=args.hang_timeout)
        self.current_cluster = cluster
        return job

    sbatch.parser.allow_abbrev = False  # `--clu` is sbatch's business (it will refuse it), not ours

    @line_magic
    @magic_arguments()
    @argument("--cluster", help="default: the cluster used last, or the only one")
    def squeue(self, line: str):
        """Every job the cluster's Slurm knows (anyone's: ``managed`` is False for a job not
        submitted through jupyter_gtc, such as a terminal's sbatch), finished ones for a while.
        A job's exit code is an integer, blank until it has one."""
        args = _parse(self.squeue, line)
        with _usage_errors():
            cluster = self._cluster(args.cluster)
            rows = [{"job_id": j.id, "name": j.name, "user": j.user or "", "state": j.state, "nodes": j.nodes,
                     "reason": j.reason or "", "exit_code": "" if j.exit_code is None else j.exit_code,
                     "managed": j.managed}
                    for j in api.cluster_queue(cluster)]
        self.current_cluster = cluster
        return _table(rows, ["job_id", "name", "user", "state", "nodes", "reason", "exit_code", "managed"])

    @line_magic
    @magic_arguments()
    @argument("job", help="the job's Slurm id or name")
    @argument("--cluster", help="default: the cluster used last, or the only one")
    def scancel(self, line: str):
        """Cancel a job; shows its panel, which turns CANCELLED."""
        args = _parse(self.scancel, line)
        with _usage_errors():
            cluster = self._cluster(args.cluster)  # ids restart per cluster: never guess across them
            job = api.cancel_job(args.job, cluster)
        return job

    @line_magic
    @magic_arguments()
    @argument("job", help="the job's Slurm id or name")
    @argument("--cluster", help="default: the cluster used last, or the only one")
    def gtc_tensorboard(self, line: str):
        """Start TensorBoard on the job's logs (once per kernel; it stops with the kernel)
        and show a link to it."""
        args = _parse(self.gtc_tensorboard, line)
        with _usage_errors():
            return api.job_tensorboard(args.job, self._cluster(args.cluster))

    @line_magic
    @magic_arguments()
    @argument("job", help="the finished job's Slurm id or name")
    @argument("--model", required=True, help="the model's name: a new model, or a new version of one")
    @argument("--alias", action="append", default=[], help="an alias for the new version (repeatable)")
    @argument("--description", help="what this version is")
    @argument("--label", action="append", default=[], metavar="KEY=VALUE", help="a label (repeatable)")
    @argument("--copy", action="store_true", help="copy the model folder into $GTC_HOME/models/")
    @argument("--parent", metavar="NAME[@VERSION]", help="the registered model it started from")
    @argument("--cluster", help="default: the cluster used last, or the only one")
    def gtc_register(self, line: str):
        """Register the job's model (its AIP_MODEL_DIR) as a new version; returns the ``Model``."""
        from .cli_models import parse_labels  # the CLI's `gtc model register` parses the same options

        args = _parse(self.gtc_register, line)
        with _usage_errors():
            return api.register_model(args.job, args.model, alias=args.alias or None, description=args.description,
                                      labels=parse_labels(args.label), copy=args.copy, parent=args.parent,
                                      cluster=self._cluster(args.cluster))

    @line_magic
    @magic_arguments()
    @argument("cluster", nargs="?", help="default: the cluster used last, or the only one")
    @argument("--last", action="store_true", help="show the last run of the cluster's HealthCheckProgram "
                                                  "instead of running the checks now")
    def gtc_health(self, line: str):
        """Each node's health: Slurm's state and drain reason, each check's verdict (ecc, xid,
        speed, correctness, disk), what the failing checks saw, the verdict. Runs the checks now
        (a few seconds) unless --last."""
        args = _parse(self.gtc_health, line)
        with _usage_errors():
            cluster = self._cluster(args.cluster)
            rows = api.cluster_health(cluster, now=not args.last)
        self.current_cluster = cluster
        for row in rows:
            at = row.pop("checked_at")
            row["checked"] = time.strftime("%H:%M:%S", time.localtime(at)) if at else ""
        checks = [c for c in ("ecc", "xid", "speed", "correctness", "disk") if any(c in r for r in rows)]
        return _table(rows, ["node", "state", "reason", *checks, "evidence", "verdict", "checked"])

    @line_magic
    @magic_arguments()
    @argument("cluster")
    @argument("node")
    @argument("fault", help="ecc, xid, slow, disk_full, hang (its checks see it), crash (its slurmd stops) or partition (its link goes down; namespace-mode nodes)")
    @argument("--clear", action="store_true", help="take the fault away again (crash: start its slurmd again; partition: its link up)")
    def gtc_fault(self, line: str):
        """Local clusters only, for testing: inject a fault into a node, e.g.
        ``%gtc_fault demo gpu-1 ecc``; ``--clear`` takes it away."""
        args = _parse(self.gtc_fault, line)
        with _usage_errors():
            api.inject_fault(args.cluster, args.node, args.fault, clear=args.clear)
        what = "cleared from" if args.clear else "injected into"
        print(f"{args.fault} {what} {args.cluster}/{args.node}")

    @line_magic
    @magic_arguments()
    @argument("cluster", nargs="?", help="where its jobs run; default: the cluster used last, or the only one")
    @argument("--port", type=int, help="a port of its own (default: a free one), or that of a running endpoint")
    @argument("--project", default="local-project", help="the project the SDK names in its calls")
    @argument("--location", default="us-central1")
    @argument("--staging-bucket", default="gs://local-bucket")
    def gtc_vertex_local(self, line: str):
        """Run Vertex AI SDK code here: a local Vertex endpoint whose jobs run on the cluster
        (started once; it ends with the kernel), and ``aiplatform.init()`` pointed at it for this
        kernel. A later ``aiplatform.init(project=...)`` keeps the endpoint: init changes only what
        it is given. Delete the cell (and restart the kernel) to reach Vertex AI itself."""
        args = _parse(self.gtc_vertex_local, line)
        with _usage_errors():
            cluster = self._cluster(args.cluster)
            endpoint = api.find_vertex_endpoint(args.port, cluster) if args.port else None
            endpoint = endpoint or api.start_vertex_endpoint(cluster, args.port)
        import os

        from google.auth.credentials import AnonymousCredentials
        from google.cloud import aiplatform, storage

        # The SDK's uploads (from_local_script's package, a local artifact_uri) go to the
        # endpoint's storage emulator, whose buckets its jobs read.
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint.storage_host
        os.environ["GTC_GCS_MOUNT"] = str(api.gcs_root())  # gs:// as files here, as /gcs/ is on Vertex AI
        bucket = args.staging_bucket.removeprefix("gs://").split("/")[0]
        client = storage.Client(project=args.project, credentials=AnonymousCredentials())
        if client.lookup_bucket(bucket) is None:
            client.create_bucket(bucket)
        aiplatform.init(project=args.project, location=args.location, staging_bucket=args.staging_bucket,
                        api_endpoint=endpoint.api_endpoint, api_transport="rest", credentials=AnonymousCredentials())
        self.current_cluster = cluster
        print(f"aiplatform now talks to the local Vertex endpoint on port {endpoint.port}: its jobs run on {cluster}")

    @line_magic
    def gtc_clusters(self, line: str = ""):
        """Every cluster: name, backend, state, nodes ready/total, GPUs used/total."""
        if line.strip():
            raise UsageError(f"%gtc_clusters takes no arguments, got {line.strip()!r}")
        with _usage_errors():
            clusters = api.list_clusters()
        rows = [{"name": c.name, "backend": c.backend, "state": c.state,
                 "nodes": f"{sum(n.ready for n in c.nodes)}/{c.node_count}",
                 "gpus": f"{sum(n.gpus_allocated for n in c.nodes)}/{c.gpu_count}"} for c in clusters]
        return _table(rows, ["name", "backend", "state", "nodes", "gpus"])

    @line_cell_magic
    @magic_arguments()
    @argument("--cluster", help="the cluster to run trials on; default: the one used last, or the only one")
    @argument("--spec", help="a file with the spec (short form or a Vertex HyperparameterTuningJob) instead of the cell")
    @argument("--name", help="the study's name (default: the spec's display_name, or study-<time>)")
    @argument("--metric", help="NAME:minimize or NAME:maximize; wins over the spec's")
    @argument("--trials", type=int, help="max_trial_count; wins over the spec's")
    @argument("--parallel", type=int, help="parallel_trial_count; wins over the spec's")
    @argument("--max-failed", type=int, dest="max_failed", help="max_failed_trial_count; wins over the spec's")
    @argument("--seed", type=int, help="the sampler's seed")
    @argument("--backend", choices=["vertex"],
              help="vertex: run it as a Vertex AI HyperparameterTuningJob on the Vertex target (--cluster names one)")
    def gtc_tune(self, line: str, cell: str | None = None):
        """Run a hyperparameter tuning study: the cell is its spec (YAML: parameters, metric,
        algorithm, early_stopping, job; or a Vertex HyperparameterTuningJob as JSON), or
        ``--spec FILE``. Each trial is a Slurm job; its script gets the hyperparameters as
        ``"$@"`` (``srun python train.py "$@"``). Shows the study's live panel; ``study = _``."""
        args = _parse(self.gtc_tune, line, cell=cell is not None)
        if bool(cell and cell.strip()) == bool(args.spec):
            raise UsageError("give the study spec either as the cell or with --spec FILE (not both)")
        with _usage_errors():
            cluster = api.vertex_cluster(args.cluster) if args.backend == "vertex" else self._cluster(args.cluster)
            overrides = dict(metric=args.metric, max_trials=args.trials, parallel=args.parallel,
                             max_failed_trials=args.max_failed, seed=args.seed)
            spec = (api.load_tuning_spec(args.spec, **overrides) if args.spec
                    else api.parse_tuning_spec(cell, **overrides))
            study = api.create_study(cluster, spec, args.name)
        self.current_cluster = cluster
        return study

    def _cluster(self, name: str | None) -> str:
        """``name`` if given; else the cluster used last, if it still exists; else the only one."""
        names = _cluster_names()
        if name:
            if name not in names:  # checked here so that every magic names the cluster the same way
                raise UsageError(f"no cluster named {name!r}; clusters: {', '.join(names) or 'none yet'}")
            return name
        if self.current_cluster in names:
            return self.current_cluster
        if len(names) == 1:
            return names[0]
        if not names:
            raise UsageError("no cluster exists yet; create one with %%gtc_cluster")
        raise UsageError(f"which cluster? pass --cluster NAME (clusters: {', '.join(names)})")


def load(shell) -> None:
    """What ``%load_ext jupyter_gtc`` does."""
    shell.register_magics(GtcMagics)
    # An ipython_display formatter, not a mimebundle one: the panel may grow a live plot,
    # and BokehJS's loader must go out in the same output before it.
    shell.display_formatter.ipython_display_formatter.for_type(api.Job, _display_job_panel)
    shell.display_formatter.ipython_display_formatter.for_type(api.Study, _display_study_panel)
    # A study on Vertex AI shows in the same panel; by name, so its module is not imported here.
    shell.display_formatter.ipython_display_formatter.for_type_by_name(
        "jupyter_gtc.services.vertex_study", "VertexStudy", _display_study_panel)
    # job.plot() draws with the widgets; imported at the first plot, not here (a kernel that
    # only plots, after a restart, showed no panel first to import them).
    api.register_job_plotter(_plot_job)
    api.register_endpoint_plotter(_plot_endpoint)


def _plot_endpoint(endpoint):
    from .widgets.endpoint_plot import plot_endpoint

    return plot_endpoint(endpoint)


def _plot_job(job: api.Job, tags):
    from .widgets.job_plot import plot_job

    return plot_job(job, tags)


def _display_job_panel(job: api.Job) -> None:
    from .widgets import JobPanel

    JobPanel(job)._ipython_display_()


def _display_study_panel(study: api.Study) -> None:
    from .widgets.study_panel import StudyPanel

    StudyPanel(study)._ipython_display_()


def _split(line: str, magic: str) -> list[str]:
    """Arguments split as a shell would (quotes removed), unlike magic_arguments' default.
    A line a shell could not split either (an unclosed quote, a trailing backslash) is the
    user's mistake: a ``UsageError`` naming the magic and the line, not shlex's ValueError."""
    try:
        return arg_split(line, posix=True)
    except ValueError as e:  # shlex: "No closing quotation", "No escaped character"
        raise UsageError(f"{magic}: cannot split the arguments {line.strip()!r}: {str(e).lower()}; close the "
                         "quote, or escape a quote or backslash that is meant literally (\\\" or \\\\)") from None


def _parse(magic, line: str, cell: bool = False):
    """``line`` parsed by the magic's argparse; ``cell``: whether it is a cell magic's line."""
    return magic.parser.parse_args(_split(line, ("%%" if cell else "%") + magic.parser.prog))


@contextmanager
def _usage_errors() -> Iterator[None]:
    """A ``GtcError`` becomes a ``UsageError`` (one line, no traceback). A ``GtcWarning`` meanwhile
    (a job that runs in its job folder, not where it was submitted from) is printed below the cell
    as one line, ``warning: ...``, as the CLI prints it; other warnings as Python shows them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", GtcWarning)
        try:
            yield
        except GtcError as e:
            raise UsageError(str(e)) from None
    for w in caught:
        if issubclass(w.category, GtcWarning):
            print(f"warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


@contextmanager
def _option_named(field: str, option: str) -> Iterator[None]:
    """A ``SpecError`` in the api's ``field`` names the magic's ``option`` instead."""
    try:
        yield
    except SpecError as e:
        if e.field != field:
            raise
        raise SpecError(option, e.value, e.expected) from None


def _cluster_names() -> list[str]:
    return [c.name for c in api.list_clusters(with_status=False)]


def _with_progress(title: str, action):
    """Run ``action(progress)`` while a progress line shows its steps below the cell."""
    from .widgets import ClusterProgress

    progress = ClusterProgress(title)
    display(progress)
    try:
        result = action(progress)
    except Exception as e:
        progress.finish(error=str(e))
        raise
    progress.finish()
    return result


def _table(rows: list[dict[str, Any]], columns: list[str]):
    """A pandas DataFrame where pandas is installed, else a ``Table``."""
    try:
        import pandas
    except ImportError:
        return Table(rows, columns)
    return pandas.DataFrame(rows, columns=columns)


class Table(list):
    """Rows (dicts) that a notebook shows as an HTML table and a terminal as aligned text."""

    def __init__(self, rows: list[dict[str, Any]], columns: list[str]):
        super().__init__(rows)
        self.columns = columns

    def _cells(self) -> list[list[str]]:
        return [["" if row.get(c) is None else str(row.get(c)) for c in self.columns] for row in self]

    def _repr_html_(self) -> str:
        import html

        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in cells) + "</tr>" for cells in self._cells())
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(repr(self))

    def __repr__(self) -> str:
        lines = [self.columns, *self._cells()]
        widths = [max(len(line[i]) for line in lines) for i in range(len(self.columns))]
        return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines)
