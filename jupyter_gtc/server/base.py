"""What every REST handler shares: the api called off the event loop, and errors as JSON.

A handler is a few lines: parse the request, ``await self.call(api.something, ...)``,
write the result's JSON. ``call`` runs the (synchronous, sometimes slow: it runs Slurm's
commands) api function on a thread of our own, so the server keeps answering meanwhile,
and turns a ``GtcError`` into its HTTP status (each error class has its own, exceptions.py) with a
``{kind, message}`` body.

Every route checks the login (``@web.authenticated``) and then the server's Authorizer
(``@authorized``: action "read" for GET and HEAD, "write" for POST and DELETE, on the resource
``AUTH_RESOURCE``), as JupyterLab's own handlers do, so a deployment's Authorizer (JupyterHub
roles, a read-only share) decides who may do what. What runs as root on the nodes (a cluster
spec's prolog, epilog and startup scripts) needs "execute" too: ``require``.
"""

from __future__ import annotations

import functools
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.httputil import responses
from tornado.ioloop import IOLoop

from ..exceptions import GtcError

# The Authorizer's resource for every route of ours: one name, as "contents" or "kernels" is
# jupyter_server's; the action says what a request does.
AUTH_RESOURCE = "gtc"
# The action for what runs as root on the nodes, as jupyter_server asks "execute" of kernels
# and terminals: a user who may only "write" may create and scale clusters without scripts.
EXECUTE = "execute"
# The most a request of ours carries: a cluster spec with its scripts is a few KB.
MAX_BODY_BYTES = 1024 * 1024
# A body up to this size is read before the login is looked at (as tornado reads every body);
# a bigger one only once the sender is known to be allowed to write.
MAX_UNCHECKED_BODY_BYTES = 64 * 1024

# Slow work (a scale, a delete) must not hold up the quick reads the sidebar makes meanwhile,
# nor take the threads other extensions use (the loop's default executor): a pool of our own.
_executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="gtc-rest")

class ApiError(web.HTTPError):
    """An error answer: ``status`` and the JSON body ``{"kind": ..., "message": ...}``."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(status, "%s", message)  # log_message is a format: never let '%' in it
        self.kind = kind
        self.message = message


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


async def call(fn, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on the REST pool; a ``GtcError`` becomes an ``ApiError``."""
    return await call_on(_executor, functools.partial(fn, *args, **kwargs))


async def call_on(executor: ThreadPoolExecutor, fn) -> Any:
    """``fn()`` on ``executor`` (the change feed has its own: requests that hold every REST
    thread must not stop the feed, nor the feed's reads the requests); errors as ``call``'s."""
    try:
        return await IOLoop.current().run_in_executor(executor, fn)
    except GtcError as e:
        raise ApiError(e.http_status, e.kind, str(e)) from e


@web.stream_request_body
class GtcHandler(APIHandler):
    """Base of our REST handlers (``APIHandler``: answers are JSON, writes need the XSRF token
    when the login is a cookie). Each method is ``@web.authenticated`` then ``@authorized``.

    A body is read only once its sender is known to be logged in and allowed to write, and only
    up to ``MAX_BODY_BYTES`` (413 beyond): tornado would otherwise read a body of up to the
    server's limit (hundreds of MB) before any handler could look at who sent it."""

    auth_resource = AUTH_RESOURCE
    call = staticmethod(call)

    async def prepare(self) -> None:
        await super().prepare()
        self._body_parts: list[bytes] = []
        if self.request.method in ("GET", "HEAD", "OPTIONS"):
            return
        length = self.request.headers.get("Content-Length")
        if length is None or not length.isdigit() or int(length) > MAX_UNCHECKED_BODY_BYTES:
            # Refused unread: the connection then closes (a reset, for the unread bytes), so a
            # small body, what any client sends, is read and refused by the method's own checks.
            if self.current_user is None:
                raise web.HTTPError(403)
            await self.require("write", "a request with a body")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            raise ApiError(413, "BodyTooLarge", f"Content-Length {length[:20]}: a request body may hold at most "
                                                f"{MAX_BODY_BYTES} bytes")
        self.request.connection.set_max_body_size(MAX_BODY_BYTES)  # a chunked body is cut there too

    def data_received(self, chunk: bytes) -> None:
        self._body_parts.append(chunk)  # at most MAX_BODY_BYTES: the connection stops reading there

    @property
    def body(self) -> bytes:
        return b"".join(self._body_parts)

    async def require(self, action: str, why: str) -> None:
        """403 unless the Authorizer lets this user do ``action`` on our resource too: for what
        only the request's content tells (a spec with scripts), which a decorator cannot see."""
        allowed = await ensure_async(self.authorizer.is_authorized(self, self.current_user, action, AUTH_RESOURCE))
        if not allowed:
            raise web.HTTPError(403, "%s", f"User is not authorized to {action} on resource: {AUTH_RESOURCE} ({why}).")

    def write_json(self, payload: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))

    def write_operation(self, operation: Any) -> None:
        """202 Accepted: the background operation, and where to follow it."""
        self.set_header("Location", url_path_join(self.base_url, "gtc/api/operations", operation.id))
        self.write_json(operation.to_json(), status=202)

    def json_body(self) -> dict[str, Any]:
        try:
            body = json.loads(self.body or b"{}")
        except ValueError as e:
            raise bad_request(f"the request body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        return body

    def int_argument(self, name: str, default: int | None = None, minimum: int | None = None) -> int | None:
        raw = self.get_query_argument(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise bad_request(f"{name}: {raw!r} is not a whole number") from None
        if minimum is not None and value < minimum:
            raise bad_request(f"{name}: {value} is below {minimum}")
        return value

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error is ``{kind, message}``. An unexpected one says only that it happened:
        its traceback goes to the server's log (tornado logs it), never to the client."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, ApiError):
            kind, message = error.kind, error.message
        elif isinstance(error, web.HTTPError):
            kind = "HTTPError"
            message = error.log_message % error.args if error.log_message else responses.get(status_code, "error")
        else:
            kind, message = "InternalError", "the server failed to answer; its log says why"
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"kind": kind, "message": message}))
