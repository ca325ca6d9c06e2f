"""HTTP routes of the server extension.

``{base_url}gtc/api/...`` is the REST API of the sidebar: clusters
(``handlers_clusters.py``), jobs, their logs and metrics (``handlers_jobs.py``), tuning
studies (``handlers_studies.py``), the model registry (``handlers_models.py``) and the
change feed (``feed.py``). Every route needs a login, like the rest of the server, and the
Authorizer's leave (``base.py``).

``{base_url}gtc/static/bokeh/<file>`` serves the BokehJS files of the installed ``bokeh``
package (``bokeh/server/static``: ``js/bokeh.min.js``, ``js/bokeh-widgets.min.js``, ...),
so live plots render without a CDN (unreachable offline) and without INLINE resources
(about 8 MB in every saved notebook). Only a logged-in user whom the Authorizer lets "read"
gets them, like every other route of ours; a browser that opened JupyterLab has the login
cookie, so a script tag or request from the page just works.
"""

from __future__ import annotations

from pathlib import Path

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .base import AUTH_RESOURCE

API_ROUTE = "gtc/api"
BOKEH_ROUTE = "gtc/static/bokeh"
# The files never change for one bokeh version, and the plot's loader asks for them with
# `?v=<bokeh version>`, so an upgrade gets new URLs: let the browser keep them a year.
# "private": they are behind a login, so shared caches must not keep them.
_CACHE_CONTROL = "private, max-age=31536000, immutable"


def bokeh_static_dir() -> Path:
    """The folder of BokehJS's built files in the installed bokeh package."""
    from bokeh.util.paths import bokehjs_path

    return Path(bokehjs_path())


class BokehStaticHandler(JupyterHandler, web.StaticFileHandler):
    """BokehJS's static files, for authenticated and authorized users only."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    def head(self, path: str):
        return web.StaticFileHandler.head(self, path)

    @web.authenticated
    @authorized
    def get(self, path: str, include_body: bool = True):
        return web.StaticFileHandler.get(self, path, include_body)

    def set_extra_headers(self, path: str) -> None:
        # Runs after StaticFileHandler's own cache headers: replaces its Cache-Control.
        self.set_header("Cache-Control", _CACHE_CONTROL)

    @classmethod
    def get_cache_time(cls, path, modified, mime_type) -> int:
        return 365 * 24 * 3600  # also sets Expires, for old caches


def setup_routes(web_app) -> None:
    """Add the extension's routes to a Jupyter server's tornado application."""
    from . import feed, handlers_clusters, handlers_endpoints, handlers_jobs, handlers_models, handlers_studies

    base_url = web_app.settings["base_url"]
    api_prefix = url_path_join(base_url, API_ROUTE)
    web_app.settings["gtc_feed"] = feed.ChangeFeed()  # one per server, shared by every connection
    web_app.add_handlers(".*$", [
        *handlers_clusters.handlers(api_prefix),
        *handlers_jobs.handlers(api_prefix),
        *handlers_studies.handlers(api_prefix),
        *handlers_models.handlers(api_prefix),
        *handlers_endpoints.handlers(api_prefix),
        *feed.handlers(api_prefix),
        (url_path_join(base_url, BOKEH_ROUTE, "(.*)"), BokehStaticHandler,
         {"path": str(bokeh_static_dir())}),
    ])
