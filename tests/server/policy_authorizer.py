"""A deployment's Authorizer, for the tests: it refuses the actions named in a file on
jupyter_gtc's resource, as JupyterHub's roles or a read-only share would refuse them. The
server loads it from its config (``ServerApp.authorizer_class``); a test writes the file to
change what the running server allows."""

from __future__ import annotations

from pathlib import Path

from jupyter_server.auth import Authorizer
from traitlets import Unicode

RESOURCE = "gtc"  # jupyter_gtc's; the server's own resources (kernels, contents) stay allowed


class PolicyAuthorizer(Authorizer):
    policy_file = Unicode(config=True, help="a file of the actions to refuse on resource 'gtc', one a line")

    def is_authorized(self, handler, user, action: str, resource: str) -> bool:
        if resource != RESOURCE:
            return True
        return action not in Path(self.policy_file).read_text().split()
