"""Slurm's command-line tools for one cluster, run on the cluster's host (this machine for
a local cluster, through ``_process.run``; a login node over SSH for an existing one).

The cluster is chosen by ``env`` (a local cluster's ``SLURM_CONF``); files it reads, the
completion file, are read through the host too.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from .. import _process
from ..exceptions import CommandError
from ..hosts import LOCAL, Host
from .parse import (SACCT_FIELDS, SQUEUE_ENV, JobStatus, NodeStatus, SqueueFormatReader, parse_jobcomp, parse_sacct,
                    parse_scontrol_nodes, parse_squeue_json, squeue_format)

# What slurmctld answers (its slurm_errno.c) when a job action does not fit the job's state or
# kind: the request's mistake, not Slurm failing. scontrol prints it, then "for job N".
STATE_REFUSALS = (
    "Job is pending execution",
    "Job is no longer pending execution",
    "Job has already finished",
    "Job/step already completing or completed",
    "Job has already started",
    "Job is not running",
    "Job is not pending nor running",
    "Job is not suspended",
    "Job is not finished",
    "Job is current suspended, requested operation disabled",
    "Job can not be altered now, try again later",
    "Only batch jobs are accepted or processed",
)


def state_refusal(error: CommandError) -> str | None:
    """Slurm's reason when ``error`` is a refusal because of the job's state, else None."""
    return next((reason for reason in STATE_REFUSALS if reason in error.stderr), None)


class SlurmCommands:
    def __init__(self, env: dict[str, str], timeout: float = 30, jobcomp_file: Path | None = None,
                 host: Host = LOCAL, accounting: bool = False):
        self.env = env
        self.timeout = timeout
        self.jobcomp_file = jobcomp_file
        self.host = host
        self.accounting = accounting  # the cluster keeps accounting (slurmdbd): sacct remembers every job

    def run(self, argv: list[str], *, check: bool = True, timeout: float | None = None) -> _process.Result:
        return self.host.run(argv, env=self.env, check=check, timeout=timeout or self.timeout)

    def ping(self) -> bool:
        """True when slurmctld answers."""
        result = self.run(["scontrol", "ping"], check=False, timeout=10)
        return result.returncode == 0 and "UP" in result.stdout

    def nodes(self) -> list[NodeStatus]:
        return parse_scontrol_nodes(self.run(["scontrol", "-d", "-o", "show", "node"]).stdout)

    def job_ids(self, nodes: list[str] | None = None, states: list[str] | None = None) -> list[str]:
        """Ids of jobs not yet finished, optionally only those on ``nodes`` or in ``states``."""
        argv = ["squeue", "-h", "-o", "%i"]
        if nodes:
            argv += ["-w", ",".join(nodes)]
        if states:
            argv += ["-t", ",".join(states)]
        return self.run(argv).stdout.split()

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self.run(["scancel", *job_ids])

    def submit(self, script: Path, options: list[str], env: dict[str, str], job_dir: Path,
               work_dir: str | Path | None, script_args: list[str] | None = None) -> str:
        """``sbatch --parsable``; options on the command line win over the script's #SBATCH lines;
        ``script_args`` reach the script as its ``"$@"``. The job runs in ``work_dir`` (its
        ``--chdir``: the folder it was submitted from, or ``job_dir``); None where ``options`` or
        the script's #SBATCH lines choose. (sbatch's own default, its working directory, is
        never meant: over SSH that is the login's home, not the submitter's folder.)"""
        chdir = [] if work_dir is None else [f"--chdir={work_dir}"]
        result = self.host.run(["sbatch", "--parsable", *chdir, *options, str(script),
                                *(script_args or [])], env={**env, **self.env}, timeout=self.timeout)
        return result.stdout.strip().split(";")[0]

    def queue(self, reader: SqueueFormatReader | None = None) -> list[JobStatus]:
        """Every job slurmctld still knows, finished ones included (for MinJobAge), in one call:
        ``squeue -h -O`` with only ``SQUEUE_FIELDS`` (not ``--json``: ~12x fewer bytes, and its
        layout changes with each release). ``reader``, kept from call to call (the poller's),
        parses only the jobs that changed since its last call."""
        spec, sep, end = squeue_format(secrets.token_hex(8))  # new each call: no name can hold it
        result = self.host.run(["squeue", "--noheader", "--states=all", "-O", spec],
                               env={**self.env, **SQUEUE_ENV}, timeout=self.timeout)
        return (reader or SqueueFormatReader()).read(result.stdout, sep, end, as_json=self.queue_json)

    def queue_json(self) -> list[JobStatus]:
        """``queue()`` through ``squeue --json``: asked only for a job whose name, paths or
        comment hold the -O separator (0x1f), once each time such a job changes."""
        return parse_squeue_json(self.run(["squeue", "--json", "--states=all"]).stdout)

    def finished_jobs(self, offset: int = 0, unseen: list[str] | None = None) -> tuple[list[JobStatus], int]:
        """Jobs that slurmctld may have forgotten: those recorded by jobcomp/filetxt after byte
        ``offset`` (a local cluster's), and with accounting, the ``unseen`` ones (ids that
        ``queue()`` no longer lists) as sacct has them, in one call. Returns them and the new
        offset. Only whole lines are consumed, so a line being written is read on the next call."""
        accounted = self.accounted(unseen) if self.accounting and unseen else []
        if self.jobcomp_file is None:
            return accounted, offset
        try:
            data = self.host.read(self.jobcomp_file, offset)
        except FileNotFoundError:
            return [], offset
        complete = data[: data.rfind(b"\n") + 1]
        return accounted + parse_jobcomp(complete.decode(errors="replace")), offset + len(complete)

    def accounted(self, job_ids: list[str]) -> list[JobStatus]:
        """``job_ids`` (and each one's array tasks) as the accounting database has them. With -j
        sacct looks back to the epoch, not to today's midnight; -a: another user's too."""
        return parse_sacct(self.run(["sacct", "-n", "-P", "-X", "-a", "-j", ",".join(job_ids),
                                     "-o", ",".join(SACCT_FIELDS)]).stdout)

    def messages_in_flight(self) -> int:
        """slurmctld's messages to nodes neither delivered nor given up yet (sdiag's agents and
        their retry queue; any user may read them)."""
        out = self.run(["sdiag"]).stdout
        return sum(int(n) for n in re.findall(r"^Agent (?:queue size|count):\s*(\d+)", out, re.M))

    def requeue(self, job_id: str) -> None:
        self.run(["scontrol", "requeue", job_id])

    def hold(self, job_id: str) -> None:
        """Keep a pending job from starting (squeue then shows reason JobHeldUser)."""
        self.run(["scontrol", "hold", job_id])

    def release(self, job_id: str) -> None:
        self.run(["scontrol", "release", job_id])

    def reconfigure(self) -> None:
        self.run(["scontrol", "reconfigure"])
