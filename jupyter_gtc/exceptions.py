"""Every error jupyter_gtc raises, each carrying the data a front end needs to explain it.

Front ends translate these: a magic raises ``UsageError``, a REST route answers 4xx with
``{kind, message}``, the CLI prints one line and exits non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence


class GtcError(Exception):
    """Base of all jupyter_gtc errors. ``kind`` names the class for JSON answers."""

    @property
    def kind(self) -> str:
        return type(self).__name__


class SpecError(GtcError):
    """A spec field holds a value that is not valid; nothing was started or stored."""

    def __init__(self, field: str, value: object, expected: str):
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{field}: {value!r} is not valid; {expected}")


class SpecErrors(GtcError):
    """Several spec fields are invalid at once; ``errors`` lists each one."""

    def __init__(self, errors: Sequence[SpecError], what: str = "cluster spec"):
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"{len(self.errors)} problem(s) in the {what}:\n{lines}")


class CommandError(GtcError):
    """An external command failed or timed out."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str, timeout: float | None = None):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        self.timeout = timeout
        if returncode is None:
            what = f"timed out after {timeout:g}s"
        else:
            what = f"exited with code {returncode}"
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else "no error output"
        super().__init__(f"{self.argv[0]} {what}: {detail}")


class HostUnreachable(CommandError):
    """SSH could not reach or log in to a cluster's host, or the connection dropped before
    the answer came (the message says whether the command may have run). The poller keeps
    it as a warning and tries again next tick."""

    def __init__(self, argv: Sequence[str], destination: str, stderr: str):
        super().__init__(argv, 255, stderr)
        self.destination = destination
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else "no error output"
        hint = ""
        if "Permission denied" in detail and ("password" in detail or "keyboard-interactive" in detail):
            hint = (f". If this login asks for a password or a second factor, open the connection once in a "
                    f"terminal: `gtc cluster connect {destination}`; everything then reuses it")
        self.args = (f"cannot reach {destination} over SSH: {detail}{hint}",)


class HostKeyRefused(HostUnreachable):
    """The host's key is unknown, or not the one known_hosts holds: SSH refused to talk to
    it, as it must. Says how to check and accept a key."""

    def __init__(self, argv: Sequence[str], destination: str, stderr: str):
        super().__init__(argv, destination, stderr)
        changed = "IDENTIFICATION HAS CHANGED" in stderr
        why = ("its host key is not the one your known_hosts holds (a reinstalled host, or someone "
               "in between)" if changed else "its host key is not in your known_hosts")
        fix = (f"if the change is expected, remove the old key (`ssh-keygen -R {destination}`) and "
               if changed else "")
        self.args = (f"refusing to connect to {destination}: {why}. To accept it, {fix}log in once with "
                     f"`ssh {destination}` and compare the fingerprint it shows with your administrator's",)


class SlurmError(GtcError):
    """A Slurm command succeeded but reported errors in its output (e.g. slurmctld is down)."""


class ClusterNotFound(GtcError):
    def __init__(self, name: str | None, known: Sequence[str] = ()):
        self.name = name
        hint = (f"known clusters: {', '.join(known)}" if known
                else "no clusters exist yet; create one with `gtc cluster create -f SPEC`")
        super().__init__(f"no cluster named {name!r}; {hint}" if name else hint)


class ClusterExists(GtcError):
    def __init__(self, name: str):
        self.name = name
        super().__init__(f"a cluster named {name!r} already exists; delete it first or choose another display_name")


class ClusterBusy(GtcError):
    """An action would disturb running jobs, so it was refused."""


class OperationNotFound(GtcError):
    """No background cluster operation with that id is known (any more)."""


class BackendUnavailable(GtcError):
    """The backend cannot run here (missing programs, permissions); the message says how to fix it."""


class JobNotFound(GtcError):
    """No job with that id or name is known."""


class JobLogUnknown(JobNotFound):
    """The job is known but where it writes its output is not (a job jupyter_gtc did not
    submit, seen only in the completion file once slurmctld had forgotten it)."""


class JobSubmitError(GtcError):
    """sbatch refused the job; the message is Slurm's own."""

    def __init__(self, message: str, argv: Sequence[str] = ()):
        self.argv = list(argv)
        super().__init__(f"sbatch refused the job: {message}")


class JobStateConflict(GtcError):
    """Slurm refused an action because of the job's state (a hold on a finished job, a requeue
    of one still pending): the request's mistake, not Slurm failing. The message names the job,
    its state, Slurm's reason and which jobs the action applies to."""

    # What each action applies to, which the message tells the user.
    VALID = {
        "hold": "hold applies to a job that has not finished (a running one waits when it is requeued)",
        "release": "release applies to a held job that has not finished",
        "requeue": "requeue applies to a running or finished batch job; a pending one is in the queue already",
    }

    def __init__(self, job_id: str, name: str, state: str, action: str, reason: str):
        self.job_id, self.name, self.state, self.action, self.reason = job_id, name, state, action, reason
        valid = self.VALID.get(action, "")
        super().__init__(f"job {job_id} ({name}) is {state}: Slurm refused to {action} it ({reason})"
                         + (f"; {valid}" if valid else ""))


class JobTimeout(GtcError):
    """A wait ran out of time; the job itself goes on."""


class ClusterStartError(GtcError):
    """A cluster's daemons did not come up; the message carries the relevant log lines."""


class StudyNotFound(GtcError):
    """No tuning study of that name is known."""


class StudyExists(GtcError):
    """A tuning study of that name exists already."""


class StudyBusy(GtcError):
    """A study cannot do that now: another process drives it, or none does."""


class StudyTimeout(GtcError):
    """A wait for a study ran out of time; the study itself goes on."""


class RecipeOutputMissing(GtcError):
    """No finished run of the recipe (or job) whose model is asked for: the message says which
    recipe to run first, or what became of its last run."""
