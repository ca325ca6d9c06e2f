"""A client of Vertex AI training clusters (``modelDevelopmentClusters``, v1beta1, allow-listed
projects): create, get, list, patch (and scale, a patch of ``node_pools``), delete and
``reportFaultyNodes``, each change a long-running operation polled under ``/v1/`` until done,
its ``metadata.progressMessage`` passed on as progress lines; and ``callSlurmRestApi``, one call
of the cluster's Slurm REST API (``slurm_api.py`` drives jobs with it).

There is no typed client (no proto in google-cloud-aiplatform, no discovery document), so it
speaks JSON over google-auth's ``AuthorizedSession``, as Google's own Slurm Job API sample does.
The base URL is configurable: ``https://REGION-aiplatform.googleapis.com`` by default, or the
local Vertex endpoint (``http://127.0.0.1:PORT``, no credentials: it knows its own user's calls
by the connection, ``vertex/guard.py``). Google's errors become ``CloudApiError``s naming the fix
(``errors.py``). google-auth and requests are imported when a client is made.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from ..exceptions import CloudApiError, CommandError, GtcError
from ..spec.vertex_cluster import check_cluster_id
from .errors import cloud_error

Progress = Callable[[str], None]
OPERATION_TIMEOUT_S = 120 * 60  # what Terraform allows each operation of this resource
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def _quiet(message: str) -> None:
    pass


class TrainingClusters:
    """The training clusters of ``project`` in ``region``. ``api_endpoint``: a base URL
    (``http://`` keeps plain HTTP); ``credentials``: google-auth credentials, by default the
    application default ones for Google's API and none for an ``http://`` loopback endpoint.
    ``poll_s``: the first wait between two polls of an operation (doubling up to ``max_poll_s``)."""

    def __init__(self, project: str, region: str, api_endpoint: str | None = None, credentials: Any = None,
                 poll_s: float = 5.0, max_poll_s: float = 30.0, timeout_s: float = 60.0):
        from google.auth.transport.requests import AuthorizedSession

        self.project, self.region = project, region
        self.base = (api_endpoint or f"https://{region}-aiplatform.googleapis.com").rstrip("/")
        if "://" not in self.base:
            self.base = "https://" + self.base
        if credentials is None:
            credentials = _anonymous() if _loopback(self.base) else _default_credentials()
        self.session = AuthorizedSession(credentials)
        self.poll_s, self.max_poll_s, self.timeout_s = poll_s, max_poll_s, timeout_s

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def name(self, cluster_id: str) -> str:
        return f"{self.parent}/modelDevelopmentClusters/{cluster_id}"

    # -- the resource ----------------------------------------------------------------------

    def create(self, cluster_id: str, body: dict[str, Any], progress: Progress = _quiet,
               timeout: float = OPERATION_TIMEOUT_S) -> dict[str, Any]:
        """Create ``cluster_id`` from ``body`` (a ``ModelDevelopmentCluster``, as the spec's
        ``to_vertex()``), wait for its operation, and return the cluster as it is then."""
        operation = self.begin_create(cluster_id, body)
        progress(f"creating training cluster {cluster_id} in {self.parent}")
        self.wait(operation, f"create training cluster {cluster_id}", progress, timeout,
                  request_context(body, cluster_id))
        return self.get(cluster_id)

    def begin_create(self, cluster_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """The create's request alone: its operation, once Google accepted it (from then on the
        id is taken by this cluster: a failed create keeps it until deleted)."""
        if _slurm_spec(body) is not None:
            check_cluster_id(cluster_id, "modelDevelopmentClusterId")  # Google's rule, refused before any call
        return self._call("POST", f"v1beta1/{self.parent}/modelDevelopmentClusters",
                          f"create training cluster {cluster_id}", request_context(body, cluster_id),
                          params={"modelDevelopmentClusterId": cluster_id}, body=body)

    def get(self, cluster_id: str) -> dict[str, Any]:
        return self._call("GET", f"v1beta1/{self.name(cluster_id)}", f"get training cluster {cluster_id}",
                          {"cluster": cluster_id})

    def list(self, page_size: int | None = None) -> Iterator[dict[str, Any]]:
        """Every training cluster of the project in the region, a page (``pageSize``) at a time."""
        token = None
        while True:
            params = {k: v for k, v in (("pageSize", page_size), ("pageToken", token)) if v}
            page = self._call("GET", f"v1beta1/{self.parent}/modelDevelopmentClusters",
                              f"list training clusters of {self.parent}", {}, params=params)
            yield from page.get("modelDevelopmentClusters") or []
            token = page.get("nextPageToken")
            if not token:
                return

    def patch(self, cluster_id: str, body: dict[str, Any], update_mask: list[str], progress: Progress = _quiet,
              timeout: float = OPERATION_TIMEOUT_S) -> dict[str, Any]:
        """Change the fields ``update_mask`` names (``node_pools``,
        ``orchestrator_spec.slurm_spec.partitions``, ...) to ``body``'s; a repeated field is
        replaced whole. Waits for the operation; returns the cluster as it is then."""
        if not update_mask:
            raise GtcError("updateMask: empty; name the fields to change (node_pools, "
                           "orchestrator_spec.slurm_spec.partitions, ...)")
        what = f"update training cluster {cluster_id} ({', '.join(update_mask)})"
        context = request_context(body, cluster_id)
        operation = self._call("PATCH", f"v1beta1/{self.name(cluster_id)}", what, context,
                               params={"updateMask": ",".join(update_mask)}, body=body)
        self.wait(operation, what, progress, timeout, context)
        return self.get(cluster_id)

    def scale(self, cluster_id: str, pool_id: str, nodes: int, progress: Progress = _quiet,
              timeout: float = OPERATION_TIMEOUT_S) -> dict[str, Any]:
        """Resize one node pool: a patch of ``node_pools`` with every pool as the cluster has it
        (a repeated field is replaced whole) and that pool's node count set to ``nodes``."""
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
            raise GtcError(f"nodes: {nodes!r} is not valid; a whole number of nodes, at least 1")
        pools = [dict(p) for p in _field(self.get(cluster_id), "nodePools", "node_pools") or []]
        ids = [p.get("id") for p in pools]
        if pool_id not in ids:
            raise GtcError(f"pool: {pool_id!r} is not valid; node pools of {cluster_id}: {', '.join(map(str, ids))}")
        for pool in pools:
            if pool.get("id") == pool_id:
                pool.pop("scaling_spec", None)
                pool["scalingSpec"] = {"minNodeCount": nodes, "maxNodeCount": nodes}
        progress(f"scaling pool {pool_id} of {cluster_id} to {nodes} node(s)")
        return self.patch(cluster_id, {"nodePools": pools}, ["node_pools"], progress, timeout)

    def delete(self, cluster_id: str, progress: Progress = _quiet, timeout: float = OPERATION_TIMEOUT_S) -> None:
        what = f"delete training cluster {cluster_id}"
        operation = self._call("DELETE", f"v1beta1/{self.name(cluster_id)}", what, {"cluster": cluster_id})
        self.wait(operation, what, progress, timeout)

    def report_faulty_node(self, cluster_id: str, node_id: str, reasons: list[dict[str, str]] | None = None,
                           progress: Progress = _quiet, timeout: float = OPERATION_TIMEOUT_S) -> None:
        """Report one node faulty, so the service replaces it: ``{nodeActions: [{nodeId}]}``, with
        ``reportFaultyHost.faultReasons`` (``{behavior, description}``) where given."""
        action: dict[str, Any] = {"nodeId": node_id}
        if reasons:
            action["reportFaultyHost"] = {"faultReasons": reasons}
        what = f"report node {node_id} of training cluster {cluster_id} faulty"
        operation = self._call("POST", f"v1beta1/{self.name(cluster_id)}:reportFaultyNodes", what,
                               {"cluster": cluster_id}, body={"nodeActions": [action]})
        self.wait(operation, what, progress, timeout)

    # -- the Slurm Job API -------------------------------------------------------------------

    def call_slurm_rest_api(self, cluster_id: str, method: str, path: str, body: dict[str, Any] | None = None,
                            query: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """One call of the cluster's Slurm REST API through ``:callSlurmRestApi`` (synchronous):
        ``method`` GET, POST or DELETE (or Google's ``HTTP_METHOD_*``), ``path`` Slurm's own
        (``/slurm/v0.0.42/jobs/``), ``query`` added to it (a list's items joined by commas).
        Returns Slurm's status and its answer: the ``body`` string parsed, or ``structuredBody``.
        Google's errors are ``CloudApiError``s (``errors.py``); a Slurm status of 400 or more is a
        ``SlurmApiError`` naming Slurm's own error text and the path."""
        verb = _SLURM_METHODS.get(method.upper().removeprefix("HTTP_METHOD_"))
        if verb is None:
            raise GtcError(f"method: {method!r} is not valid; GET, POST or DELETE")
        if not path.startswith("/"):
            raise GtcError(f"path: {path!r} is not valid; Slurm's REST path, as /slurm/v0.0.42/jobs/")
        if query:
            path += "?" + urllib.parse.urlencode(
                {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else v for k, v in query.items()})
        request: dict[str, Any] = {"method": verb, "path": path}
        if body is not None:
            request["body"] = body
        size = len(json.dumps(request).encode())
        if size > MAX_SLURM_REQUEST_BYTES:  # Google refuses it (INVALID_ARGUMENT): say why before sending
            raise GtcError(f"Slurm REST API {path}: the request is {size} bytes, over the "
                           f"{MAX_SLURM_REQUEST_BYTES} the Slurm Job API takes (a script that large goes "
                           f"through the login node: `jobs: ssh`)")
        what = f"Slurm REST API {method.upper().removeprefix('HTTP_METHOD_')} {path} on training cluster {cluster_id}"
        answer = self._call("POST", f"v1beta1/{self.name(cluster_id)}:callSlurmRestApi", what,
                            {"cluster": cluster_id}, body=request)
        status, data = slurm_answer(answer)
        if status >= 400:
            raise SlurmApiError(verb, path, status, slurm_error_text(data), cluster_id)
        return status, data

    # -- operations and the wire -----------------------------------------------------------

    def wait(self, operation: dict[str, Any], what: str, progress: Progress = _quiet,
             timeout: float = OPERATION_TIMEOUT_S, context: dict[str, Any] | None = None) -> dict[str, Any]:
        """Poll ``operation`` (under ``/v1/``) until done; each new ``progressMessage`` of its
        metadata is a progress line. Returns its ``response``; its ``error`` is raised."""
        deadline, pause, said = time.monotonic() + timeout, self.poll_s, None
        while True:
            message = (operation.get("metadata") or {}).get("progressMessage")
            if message and message != said:
                progress(message)
                said = message
            if operation.get("done"):
                if "error" in operation:
                    raise cloud_error(operation["error"], what, self.project, context)
                return operation.get("response") or {}
            if time.monotonic() + pause > deadline:
                raise GtcError(f"{what}: not done after {timeout:g} s (operation {operation.get('name')}); it may "
                               f"still finish: look with `gtc cluster describe`")
            time.sleep(pause)
            pause = min(pause * 2, self.max_poll_s)
            operation = self._call("GET", f"v1/{operation['name']}", what, context or {})

    def _call(self, method: str, path: str, what: str, context: dict[str, Any], params: dict[str, Any] | None = None,
              body: dict[str, Any] | None = None) -> dict[str, Any]:
        import requests

        url = f"{self.base}/{urllib.parse.quote(path, safe='/:@')}"
        try:
            answer = self.session.request(method, url, params=params, json=body, timeout=self.timeout_s)
        except requests.RequestException as e:
            raise CloudApiError("UNAVAILABLE", None, f"{what}: {self.base} did not answer ({type(e).__name__}: "
                                                     f"{e}); check the network and the api_endpoint") from None
        try:
            data = answer.json() if answer.content else {}
        except ValueError:
            data = None
        if answer.status_code >= 400 or not isinstance(data, dict):
            error = data.get("error") if isinstance(data, dict) else None
            raise cloud_error(error or {"message": answer.text[:500]}, what, self.project, context, answer.status_code)
        return data


# Google's enum for the Slurm Job API's method (``HTTP_METHOD_GET``...), by Slurm's verb.
_SLURM_METHODS = {"GET": "HTTP_METHOD_GET", "POST": "HTTP_METHOD_POST", "DELETE": "HTTP_METHOD_DELETE"}
# What the Slurm Job API takes in one request (Google: "requests under 1 MB"); 10^6, the
# stricter reading, so that no request we send is refused for its size.
MAX_SLURM_REQUEST_BYTES = 1_000_000


class SlurmApiError(CommandError):
    """Slurm answered a call of the Slurm Job API with an error status: ``status`` Slurm's HTTP
    status, ``stderr`` its own error text (``errors[].error``/``description``), ``argv`` the
    method and path. A ``CommandError``, as a refused ``scontrol``/``sbatch`` is: the services
    read Slurm's reason from ``stderr`` the same way (a hold of a finished job, a refused submit)."""

    def __init__(self, method: str, path: str, status: int, text: str, cluster_id: str):
        self.argv, self.returncode, self.stderr, self.timeout = [method, path], status, text, None
        self.status, self.path = status, path
        GtcError.__init__(self, f"Slurm REST API {method.removeprefix('HTTP_METHOD_')} {path} on training cluster "
                                f"{cluster_id} answered {status}: {text or 'no error text'}")


def slurm_answer(answer: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """``callSlurmRestApi``'s answer as (Slurm's status, Slurm's JSON): ``body`` is Slurm's answer
    as a string, ``structuredBody`` as an object (either may come; text that is not JSON, a
    proxy's error page, becomes Slurm's error shape holding it)."""
    try:
        status = int(answer.get("status") or 0)
    except (TypeError, ValueError):
        status = 0
    data = answer.get("structuredBody")
    if not isinstance(data, dict):
        text = answer.get("body") or ""
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = None
        if not isinstance(data, dict):
            data = {"errors": [{"error": str(text)[:500]}]}
    return status, data


def slurm_error_text(data: dict[str, Any]) -> str:
    """Slurm's own words for what went wrong (v0.0.42's ``errors[]``: ``error``, the text of its
    errno, and ``description``, what the call was doing), each once."""
    words: list[str] = []
    for error in data.get("errors") or []:
        if isinstance(error, dict):
            words += [str(error[k]) for k in ("error", "description") if error.get(k)]
        elif error:
            words.append(str(error))
    return "; ".join(dict.fromkeys(words))


def _field(data: dict[str, Any], camel: str, snake: str) -> Any:
    return data.get(camel, data.get(snake))


def _slurm_spec(body: dict[str, Any]) -> Any:
    orchestrator = _field(body, "orchestratorSpec", "orchestrator_spec") or {}
    return _field(orchestrator, "slurmSpec", "slurm_spec") if isinstance(orchestrator, dict) else None


def request_context(body: dict[str, Any], cluster_id: str) -> dict[str, Any]:
    """The zones and machine types a request asks for: what a stockout's message names."""
    pools = [p for p in _field(body, "nodePools", "node_pools") or [] if isinstance(p, dict)]
    machines = [_field(_field(p, "machineSpec", "machine_spec") or {}, "machineType", "machine_type") for p in pools]
    return {"cluster": cluster_id, "zones": [z for z in dict.fromkeys(p.get("zone") for p in pools) if z],
            "machine_types": [m for m in dict.fromkeys(machines) if m]}


def _loopback(base: str) -> bool:
    host = urllib.parse.urlsplit(base).hostname or ""
    return base.startswith("http://") and host in ("127.0.0.1", "localhost", "::1")


def _anonymous() -> Any:
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


def _default_credentials() -> Any:
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=SCOPES)
    except DefaultCredentialsError:
        raise GtcError("no Google Cloud credentials here: run `gcloud auth application-default login` (or set "
                       "GOOGLE_APPLICATION_CREDENTIALS to a service account's key file)") from None
    return credentials
