"""Google's error answers (``{"error": {code, message, status, details}}``, or an operation's
``error`` ``{code, message, details}`` with a numeric code) as ``CloudApiError``s whose message
names what was refused (a permission, an API, a quota, a zone's capacity, an id) and the fix.
Pure: the client hands the decoded JSON in."""

from __future__ import annotations

import re
from typing import Any

from ..exceptions import CloudApiError

# google.rpc.Code, for an operation's error, which carries the number only.
CODES = {1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
         6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
         10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
         15: "DATA_LOSS", 16: "UNAUTHENTICATED"}
HTTP_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
               409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
               503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
STOCKOUT = "ZONE_RESOURCE_POOL_EXHAUSTED"
_PERMISSION = re.compile(r"[Pp]ermission '?([a-zA-Z]+(?:\.[a-zA-Z]+){2,})'? denied")
_ZONE = re.compile(r"zones?/([a-z]+-[a-z]+\d+-[a-z])|zone '?([a-z]+-[a-z]+\d+-[a-z])'?")
_SERVICE = re.compile(r"([a-z0-9-]+\.googleapis\.com)")


def cloud_error(error: Any, what: str, project: str = "PROJECT", context: dict[str, Any] | None = None,
                http_status: int | None = None) -> CloudApiError:
    """``error`` (the ``error`` object of an answer or an operation) as the error to raise;
    ``what`` says what was asked ("create training cluster demo"); ``context`` what the request
    was for where a message can use it (``zones``, ``machine_types``, ``cluster``)."""
    error = error if isinstance(error, dict) else {"message": str(error)}
    context = context or {}
    message = str(error.get("message") or "").strip()
    status = error.get("status") or CODES.get(error.get("code"), None) or HTTP_STATUS.get(http_status or 0, "UNKNOWN")
    infos = [d for d in error.get("details") or [] if isinstance(d, dict) and "ErrorInfo" in str(d.get("@type", ""))]
    reasons = {str(d.get("reason")) for d in infos if d.get("reason")}
    metadata: dict[str, Any] = {}
    for info in infos:
        metadata.update(info.get("metadata") or {})
    google = f" (Google said: {message})" if message else ""

    if "SERVICE_DISABLED" in reasons or "has not been used in project" in message or "it is disabled" in message:
        service = metadata.get("service") or next(iter(_SERVICE.findall(message)), "aiplatform.googleapis.com")
        return CloudApiError(status, "SERVICE_DISABLED",
                             f"{what}: the API {service} is not enabled in project {project}: enable it with "
                             f"`gcloud services enable {service} --project={project}` (a few minutes to take "
                             f"effect), then retry{google}")
    if status == "PERMISSION_DENIED":
        permission = metadata.get("permission") or next(iter(_PERMISSION.findall(message)), None)
        if permission:
            # gtc capacity's reads are Compute Engine's: a viewer's role has them all.
            role, scope = (("roles/compute.viewer", "compute.*.list") if permission.startswith("compute.")
                           else ("roles/aiplatform.admin", "aiplatform.*"))
            listed = "" if permission.startswith("compute.") else ("; training clusters also need the project "
                                                                   "allow-listed for the v1beta1 API")
            return CloudApiError(status, "IAM_PERMISSION_DENIED",
                                 f"{what}: permission {permission} denied in project {project}: grant it to whoever "
                                 f"runs this (the role {role} has every {scope} permission): "
                                 f"`gcloud projects add-iam-policy-binding {project} --member=user:YOU "
                                 f"--role={role}`{listed}{google}")
        return CloudApiError(status, None, f"{what}: permission denied in project {project}: check the "
                                           f"credentials (`gcloud auth application-default login`) and the "
                                           f"roles of that account{google}")
    if STOCKOUT in reasons or STOCKOUT in message or "does not have enough resources available" in message:
        zones = [z for pair in _ZONE.findall(message) for z in pair if z] or list(context.get("zones") or [])
        machines = ", ".join(context.get("machine_types") or []) or "the machine type asked"
        where = ", ".join(dict.fromkeys(zones)) or "the zone asked"
        return CloudApiError("RESOURCE_EXHAUSTED", STOCKOUT,
                             f"{what}: zone {where} has no capacity for {machines} now (a stockout, "
                             f"{STOCKOUT}): use a reservation (provisioning_model: RESERVATION with its "
                             f"reservation_affinity), FLEX_START or SPOT, another zone (node_pools[].zone), or "
                             f"retry later{google}")
    if status == "RESOURCE_EXHAUSTED":
        quota = metadata.get("quota_metric") or metadata.get("quota_limit") or _quoted_quota(message)
        named = f" {quota}" if quota else ""
        return CloudApiError(status, next(iter(reasons), "QUOTA_EXCEEDED"),
                             f"{what}: quota{named} exceeded in project {project}: ask for more at "
                             f"https://console.cloud.google.com/iam-admin/quotas?project={project} (or ask for "
                             f"fewer nodes or GPUs){google}")
    if status == "ALREADY_EXISTS":
        cluster = context.get("cluster", "it")
        return CloudApiError(status, None,
                             f"{what}: a training cluster {cluster} exists already in project {project} (a create "
                             f"that failed keeps its id until it is deleted): delete it (`gtc cluster delete "
                             f"{cluster}`) or choose another id{google}")
    if status == "NOT_FOUND":
        return CloudApiError(status, None, f"{what}: not found in project {project}{google}")
    if status == "UNAUTHENTICATED":
        return CloudApiError(status, None, f"{what}: the credentials were refused: run `gcloud auth "
                                           f"application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS)"
                                           f"{google}")
    return CloudApiError(status, next(iter(reasons), None), f"{what}: {status}: {message or 'no message'}")


def _quoted_quota(message: str) -> str | None:
    found = re.search(r"[Qq]uota (?:metric )?'([^']+)'", message)
    return found.group(1) if found else None
