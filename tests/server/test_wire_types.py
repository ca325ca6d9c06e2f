"""The labextension's TypeScript mirrors the JSON that Python sends field by field
(labextension/src/api.ts): this fails when a field is added or dropped on one side only."""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_gtc.services.jobs import ForeignJob, Job
from jupyter_gtc.services.poller import ClusterPoller, JobView
from jupyter_gtc.state import JobRecord, Store

API_TS = Path(__file__).resolve().parents[2] / "labextension" / "src" / "api.ts"


def interface_fields(name: str) -> set[str]:
    """The field names of ``export interface NAME { ... }`` in api.ts (its top level only)."""
    text = API_TS.read_text()
    start = text.index(f"export interface {name} {{") + len(f"export interface {name} {{")
    depth, end = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        end += 1
    body = re.sub(r"/\*.*?\*/", "", text[start:end - 1], flags=re.S)
    fields, depth = set(), 0
    for line in body.splitlines():
        if depth == 0 and (m := re.match(r"\s*(\w+)\??\s*:", line)):
            fields.add(m.group(1))
        depth += line.count("{") - line.count("}")
    return fields


def test_a_job_sends_what_the_sidebar_reads(tmp_path):
    poller = ClusterPoller("c", lambda: None, Store(tmp_path / "state.db"))  # never ticks: no thread here
    ours = Job(JobRecord("c", "7", "train", "RUNNING", str(tmp_path)), None, poller)
    theirs = ForeignJob("c", JobView("8", "PENDING", name="eval.sh", user="ada"), None, poller)
    from jupyter_gtc.server.handlers_jobs import job_json  # to_json and the failure line

    assert set(job_json(ours)) == set(job_json(theirs)) == interface_fields("IJob")
    assert (ours.to_json()["managed"], theirs.to_json()["managed"]) == (True, False)
    assert (theirs.to_json()["finished"], theirs.to_json()["job_dir"]) == (False, None)
