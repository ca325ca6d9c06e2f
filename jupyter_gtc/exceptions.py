"""Every error jupyter_gtc raises, each carrying the data a front end needs to explain it.

Front ends translate these: a magic raises ``UsageError``, the CLI prints one line and exits
non-zero, a REST route of the server extension answers ``http_status`` with ``{kind, message}``,
and the local Vertex endpoint answers as Google's APIs do, ``google_error()``. Both statuses
are the class's: one table, here, for every front end.
"""

from __future__ import annotations

from collections.abc import Sequence

# The HTTP code Google's APIs answer with each canonical status (google.rpc.Code's mapping).
GOOGLE_HTTP_CODES = {
    "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400, "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429, "CANCELLED": 499, "INTERNAL": 500, "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504,
}


def google_error_body(code: int, status: str, message: str) -> dict[str, dict[str, object]]:
    """A Google API's error answer: ``{"error": {code, message, status}}``."""
    return {"error": {"code": code, "message": message, "status": status}}


class GtcWarning(UserWarning):
    """What the user should know of an action that went ahead (a job that runs in its job folder,
    as the folder it was submitted from is not on the cluster): issued with ``warnings.warn``,
    printed as ``warning: ...`` by the magics and the CLI, shown by Python to an api caller."""


class GtcError(Exception):
    """Base of all jupyter_gtc errors. ``kind`` names the class for JSON answers;
    ``http_status`` is what our REST routes answer, ``google_status`` what the Vertex endpoint
    says (a canonical status name)."""

    http_status = 500
    google_status = "INTERNAL"

    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_json(self) -> dict[str, str]:
        """The body of our REST routes' error answers."""
        return {"kind": self.kind, "message": str(self)}

    def google_error(self) -> dict[str, dict[str, object]]:
        """The body of a Google API's error answer (its HTTP code is ``["error"]["code"]``)."""
        return google_error_body(GOOGLE_HTTP_CODES[self.google_status], self.google_status, str(self))


class InvalidArgument(GtcError):
    """The request itself is wrong (a field, a path, a body); the message says what is valid."""

    http_status = 400
    google_status = "INVALID_ARGUMENT"


class SpecError(GtcError):
    """A spec field holds a value that is not valid; nothing was started or stored."""

    http_status = 400
    google_status = "INVALID_ARGUMENT"

    def __init__(self, field: str, value: object, expected: str):
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{field}: {value!r} is not valid; {expected}")


class SpecErrors(GtcError):
    """Several spec fields are invalid at once; ``errors`` lists each one."""

    http_status = 400
    google_status = "INVALID_ARGUMENT"

    def __init__(self, errors: Sequence[SpecError], what: str = "cluster spec"):
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"{len(self.errors)} problem(s) in the {what}:\n{lines}")


class CommandError(GtcError):
    """An external command failed or timed out."""

    http_status = 502
    google_status = "UNAVAILABLE"

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

    http_status = 502
    google_status = "UNAVAILABLE"


class ClusterNotFound(GtcError):
    http_status = 404
    google_status = "NOT_FOUND"

    def __init__(self, name: str | None, known: Sequence[str] = ()):
        self.name = name
        hint = (f"known clusters: {', '.join(known)}" if known
                else "no clusters exist yet; create one with `gtc cluster create -f SPEC`")
        super().__init__(f"no cluster named {name!r}; {hint}" if name else hint)


class ClusterExists(GtcError):
    http_status = 409
    google_status = "ALREADY_EXISTS"

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"a cluster named {name!r} already exists; delete it first or choose another display_name")


class ClusterBusy(GtcError):
    """The cluster cannot do that now (its state, an operation running, jobs it would disturb),
    so it was refused; ``message`` says why and when it can."""

    http_status = 409
    google_status = "FAILED_PRECONDITION"

    def __init__(self, cluster: str, message: str, state: str | None = None):
        self.cluster = cluster
        self.state = state
        super().__init__(message)


class AmbiguousCluster(GtcError):
    """A request that names no cluster (or a job on several) matched more than one."""

    http_status = 400
    google_status = "INVALID_ARGUMENT"

    def __init__(self, choices: Sequence[str], what: str | None = None):
        self.choices = list(choices)
        self.what = what
        where = f"{what} is on several clusters" if what else "several clusters exist"
        super().__init__(f"{where} ({', '.join(self.choices)}); name one with --cluster")


class OperationNotFound(GtcError):
    """No background cluster operation with that id is known (any more)."""

    http_status = 404
    google_status = "NOT_FOUND"


class BackendUnavailable(GtcError):
    """The backend cannot run here (missing programs, permissions); the message says how to fix it."""

    google_status = "FAILED_PRECONDITION"


class JobNotFound(GtcError):
    """No job with that id or name is known (on ``cluster``, when one was named)."""

    http_status = 404
    google_status = "NOT_FOUND"

    def __init__(self, ref: str, cluster: str | None = None, message: str | None = None):
        self.ref = ref
        self.cluster = cluster
        where = f" on {cluster}" if cluster else ""
        super().__init__(message or f"no job {ref!r}{where}; `gtc job list` shows the jobs of every cluster")


class JobLogUnknown(JobNotFound):
    """The job is known but where it writes its output is not (a job jupyter_gtc did not
    submit, seen only in the completion file once slurmctld had forgotten it)."""


class LogRefused(GtcError):
    """A job's output is not shown: the file its ``--output`` names is not a regular file its
    user owns (a FIFO, a device, a file under /proc, another user's file). Jobs name their
    output themselves, so a job of another user must not reach files through ours."""

    http_status = 403
    google_status = "PERMISSION_DENIED"

    def __init__(self, path: str, why: str):
        self.path, self.why = path, why
        super().__init__(f"the job's output {path} is not shown: {why}; a job's output is shown only from a "
                         f"regular file its user owns")


class JobSubmitError(GtcError):
    """sbatch refused the job; the message is Slurm's own."""

    http_status = 400
    google_status = "INVALID_ARGUMENT"

    def __init__(self, message: str, argv: Sequence[str] = ()):
        self.argv = list(argv)
        super().__init__(f"sbatch refused the job: {message}")


class JobStateConflict(GtcError):
    """Slurm refused an action because of the job's state (a hold on a finished job, a requeue
    of one still pending): the request's mistake, not Slurm failing. The message names the job,
    its state, Slurm's reason and which jobs the action applies to."""

    http_status = 409
    google_status = "FAILED_PRECONDITION"

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
    """A wait ran out of time; the job itself goes on. ``until`` is what was waited for
    ("finished" or "started"), ``state`` the job's state when the wait gave up."""

    http_status = 504
    google_status = "DEADLINE_EXCEEDED"

    def __init__(self, job_id: str, name: str, state: str, timeout: float, until: str = "finished"):
        self.job_id, self.name, self.state, self.timeout, self.until = job_id, name, state, timeout, until
        what = f"is still {state}" if until == "finished" else "has not started"
        super().__init__(f"job {job_id} ({name}) {what} after {timeout} s")


class ClusterStartError(GtcError):
    """A cluster's daemons did not come up; the message carries the relevant log lines."""


class StudyNotFound(GtcError):
    """No tuning study of that name is known."""

    http_status = 404
    google_status = "NOT_FOUND"


class StudyExists(GtcError):
    """A tuning study of that name exists already."""

    http_status = 409
    google_status = "ALREADY_EXISTS"


class StudyBusy(GtcError):
    """A study cannot do that now: another process drives it, or none does."""

    http_status = 409
    google_status = "FAILED_PRECONDITION"


class StudyTimeout(GtcError):
    """A wait for a study ran out of time; the study itself goes on."""

    http_status = 504
    google_status = "DEADLINE_EXCEEDED"


class RecipeOutputMissing(GtcError):
    """No finished run of the recipe (or job) whose model is asked for: the message says which
    recipe to run first, or what became of its last run."""

    google_status = "FAILED_PRECONDITION"



class SettingMissing(GtcError):
    """A setting the action needs is set nowhere (``gtc config``, the environment, gcloud's
    configuration); ``key`` names it, the message says each way to set it."""

    http_status = 400
    google_status = "FAILED_PRECONDITION"

    def __init__(self, key: str, how: str):
        self.key = key
        super().__init__(f"{key} is not set: {how}")


class ActionNotSupported(GtcError):
    """The job's backend has no such action (a requeue on Vertex AI); the message says what
    to do instead."""

    http_status = 409
    google_status = "UNIMPLEMENTED"

    def __init__(self, backend: str, action: str, job_id: str, instead: str):
        self.backend, self.action, self.job_id = backend, action, job_id
        super().__init__(f"job {job_id}: the {backend} backend cannot {action} a job; {instead}")


class CheckpointRefused(GtcError):
    """A checkpoint that ``jupyter_gtc.resume`` will not load, because loading it could run
    code (a pickle of objects, or a checkpoint of the older format that stored some so);
    ``path`` names it, the message says how to go on. Nothing of it was loaded."""

    http_status = 409
    google_status = "FAILED_PRECONDITION"

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(message)


class ModelNotFound(GtcError):
    """No registered model of that name, or no version of it with that number or alias; the
    message names what is known (the closest names first)."""

    http_status = 404
    google_status = "NOT_FOUND"

    def __init__(self, ref: str, message: str):
        self.ref = ref
        super().__init__(message)


class ModelConflict(GtcError):
    """The registry refused a change its rules forbid now (deleting a model's only version, or
    the version that holds ``default``); ``field`` and ``value`` name what, the message the fix.
    Nothing was changed."""

    http_status = 409
    google_status = "FAILED_PRECONDITION"

    def __init__(self, field: str, value: object, message: str):
        self.field, self.value = field, value
        super().__init__(f"{field}: {value!r}: {message}")


class EndpointNotFound(GtcError):
    """No deployed endpoint of that id (``gtc endpoint list`` shows those there are)."""

    http_status = 404
    google_status = "NOT_FOUND"


class PredictionError(GtcError):
    """An endpoint answered a prediction with an error: ``status`` is its HTTP code (400 a bad
    request, with the reason; 429 not ready or full, retry later; 5xx the server's own)."""

    google_status = "UNAVAILABLE"  # a model server's failure; a 400 or 429 says more, below

    def __init__(self, endpoint: str, status: int, message: str):
        self.endpoint, self.status = endpoint, status
        self.http_status = status if 400 <= status < 600 else 502
        self.google_status = {400: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT", 404: "NOT_FOUND",
                              429: "RESOURCE_EXHAUSTED"}.get(status, "UNAVAILABLE")
        super().__init__(f"endpoint {endpoint} answered {status}: {message}")


class CloudApiError(GtcError):
    """Google Cloud refused a call (or an operation ended in error): ``status`` is Google's
    canonical status (PERMISSION_DENIED, RESOURCE_EXHAUSTED, ...), ``reason`` the ErrorInfo's
    (SERVICE_DISABLED, ZONE_RESOURCE_POOL_EXHAUSTED, ...), the message what it was and the fix."""

    def __init__(self, status: str, reason: str | None, message: str):
        self.status, self.reason = status, reason
        self.google_status = status if status in GOOGLE_HTTP_CODES else "INTERNAL"
        self.http_status = GOOGLE_HTTP_CODES[self.google_status]
        super().__init__(message)
