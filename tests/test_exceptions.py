"""One error table for every front end: each error class says its REST status and its Google
status, and the sidebar's routes and the Vertex endpoint answer from it."""

import inspect

from jupyter_gtc import exceptions
from jupyter_gtc.exceptions import GOOGLE_HTTP_CODES, AmbiguousCluster, ClusterBusy, GtcError, JobNotFound, JobTimeout


def error_classes():
    return [c for _, c in inspect.getmembers(exceptions, inspect.isclass) if issubclass(c, GtcError)]


def test_every_error_has_a_google_status_google_knows():
    assert {c.__name__: c.google_status for c in error_classes() if c.google_status not in GOOGLE_HTTP_CODES} == {}


def test_errors_carry_their_data_and_render_both_ways():
    error = JobNotFound("12", "demo")
    assert (error.ref, error.cluster, error.http_status) == ("12", "demo", 404)
    assert error.google_error() == {"error": {"code": 404, "status": "NOT_FOUND", "message": str(error)}}
    assert error.to_json() == {"kind": "JobNotFound", "message": "no job '12' on demo; `gtc job list` shows the "
                                                                 "jobs of every cluster"}
    busy = ClusterBusy("demo", "cluster demo is SCALING; ...", "SCALING")
    assert (busy.cluster, busy.state, busy.google_error()["error"]["code"]) == ("demo", "SCALING", 400)
    assert busy.http_status == 409  # our REST says conflict; Google says FAILED_PRECONDITION (400)
    timeout = JobTimeout("7", "train", "RUNNING", 30, until="finished")
    assert (timeout.state, timeout.google_status, str(timeout)) == ("RUNNING", "DEADLINE_EXCEEDED",
                                                                    "job 7 (train) is still RUNNING after 30 s")
    ambiguous = AmbiguousCluster(["a", "b"], what="job '3'")
    assert ambiguous.choices == ["a", "b"] and ambiguous.http_status == 400
    assert str(ambiguous) == "job '3' is on several clusters (a, b); name one with --cluster"
