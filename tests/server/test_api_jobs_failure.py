"""A failed job's JSON says why (``failure``: its log's first error line), in the job's route
and in the list the sidebar shows; a job that did not fail has none."""

from __future__ import annotations

import sys

from jupyter_gtc import api
from tests.server.api_client import ok, wait_for

CAUSE = "FAILED (exit code 1): ModuleNotFoundError: No module named 'not_a_module_here'"


def test_a_failed_job_says_why_in_rest(jupyter_server, rest_cluster):
    failed = api.submit_job(rest_cluster.name, f"#!/bin/bash\n{sys.executable} -c 'import not_a_module_here'\n",
                            ["--job-name=broken"]).wait(timeout=60)
    fine = api.submit_job(rest_cluster.name, "#!/bin/bash\ntrue\n", ["--job-name=fine"]).wait(timeout=60)
    # The server's poller sees the ends on its own tick, after this process's.
    described = wait_for(lambda: (j := ok(jupyter_server, "GET", f"jobs/{rest_cluster.name}/{failed.id}"))["finished"]
                         and j, what="the server sees the job ended")
    assert described["failure"] == CAUSE

    def both_ended() -> dict | None:
        jobs = ok(jupyter_server, "GET", f"jobs?cluster={rest_cluster.name}")["jobs"]
        ended = {j["id"]: j for j in jobs if j["finished"]}
        return ended if {failed.id, fine.id} <= set(ended) else None

    listed = wait_for(both_ended, what="the list shows both ended")
    assert listed[failed.id]["failure"] == CAUSE and listed[fine.id]["failure"] is None
