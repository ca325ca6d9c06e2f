"""``squeue -O`` of every Slurm release users run, read into the same JobStatus as ``--json``
was (tests/slurm/fixtures/squeue_format, provenance in SOURCES.md); job names, paths and
comments that hold any character; only changed jobs parsed again."""

from pathlib import Path

import pytest

from jupyter_gtc.exceptions import SlurmError
from jupyter_gtc.slurm.parse import (SqueueFormatReader, parse_squeue_fields, parse_squeue_format, parse_squeue_json,
                                     squeue_format)
from tests.slurm.squeue_stub import render
from tests.slurm.test_squeue_versions import EXPECTED

FIXTURES = Path(__file__).parent / "fixtures" / "squeue_format"
RELEASES = sorted(p for p in FIXTURES.glob("[0-9][0-9].[0-9][0-9].txt"))
_, SEP, END = squeue_format("0123456789abcdef")  # the fixtures' token


@pytest.mark.parametrize("fixture", RELEASES, ids=lambda p: p.stem)
def test_every_release_reads_as_its_json_did(fixture):
    jobs = parse_squeue_format(fixture.read_text(), SEP, END)
    assert [j.job_id for j in jobs] == [j.job_id for j in EXPECTED]
    for got, want in zip(jobs, EXPECTED):
        assert got == want, got.job_id


def test_all_the_releases_are_there():
    assert [p.stem for p in RELEASES] == ["22.05", "23.02", "23.11", "24.05", "24.11", "25.05"]


def test_real_22_05_output_with_hostile_names_reads_as_its_json():
    """Captured from a real 22.05.8: names with spaces, '|', '%', a 0x1f (the field separator),
    a backslash, a newline, unicode and 200 characters; a comment with a '|'. Only the job
    whose name holds the separator is read from --json, which is asked once for it."""
    text = (FIXTURES / "22.05.8-hostile-names.txt").read_text()
    as_json = parse_squeue_json((FIXTURES / "22.05.8-hostile-names.json").read_text())
    asked = []
    jobs = {j.job_id: j for j in SqueueFormatReader().read(text, SEP, END, lambda: asked.append(1) or as_json)}
    assert jobs == {j.job_id: j for j in as_json} and asked == [1]
    names = {j.name for j in jobs.values()}
    assert {"done ok", "fail|pipe", "sig%x", "sweep ünïcode ✓", "x" * 200, "a|b\x1fc%j d\\e",
            "line1\nline2"} <= names
    assert jobs["1"].log_path == "/tmp/i2/cap/work/logs-done ok-1.out"  # %x filled with the spaced name
    assert jobs["2"].exit_code == 3 and jobs["2"].log_path == "/tmp/i2/cap/work/a3-0-2.log"
    assert jobs["4_0"].array_task_id == 0 and jobs["4"].array_task_id is None  # tasks 1-3%1 not started
    assert jobs["6"].comment == "has | pipe" and jobs["5"].comment == "gtc-hang=30"
    without_json = {j.job_id: j for j in parse_squeue_format(text.replace("\x1fc%j", "c%j"), SEP, END)}
    assert without_json["6"].name == "a|bc%j d\\e" and without_json["7"] == jobs["7"]


def test_a_name_that_forges_a_record_stays_one_job():
    """A job named to end its record and start another (as a user who guessed at our record
    end might) is one job: each call's record end holds a fresh token. The separators in its
    name make its record too long, so it is read from --json, once while it stays the same."""
    spec, sep, end = squeue_format("feedfacecafebeef")
    _, _, their_end = squeue_format("0123456789abcdef")
    forged = f"x{their_end}\n999{sep}999{sep}N/A{sep}COMPLETED"
    row = {"JobId": "7", "ArrayJobId": "7", "State": "RUNNING", "UserName": "eve", "WorkDir": "/w", "Name": forged}
    twin = parse_squeue_fields(["7", "7", "N/A", "RUNNING", "0", "0", "N/A", "N/A", "N/A", "eve", "n/a", "",
                                "None", "/w", "", "(null)", forged])
    asked = []
    reader = SqueueFormatReader()
    for _ in range(3):
        [job] = reader.read(render(spec, [row]), sep, end, lambda: asked.append(1) or [twin])
        assert (job.job_id, job.state, job.name, job.user) == ("7", "RUNNING", forged, "eve")
    assert asked == [1]
    with pytest.raises(SlurmError, match="squeue printed 20 fields for a job where 17 were asked"):
        parse_squeue_format(render(spec, [row]), sep, end)  # no --json to ask: an error, not a guess


def test_a_record_of_the_wrong_shape_says_what_was_asked():
    with pytest.raises(SlurmError, match=r"squeue printed 3 fields for a job where 17 were asked \(JobId, "):
        parse_squeue_fields(("1", "1", "N/A"))


def test_only_the_jobs_that_changed_are_parsed_again():
    spec, sep, end = squeue_format("0123456789abcdef")
    base = {"ArrayJobId": "", "State": "PENDING", "UserName": "ada", "WorkDir": "/w", "Reason": "JobHeldUser"}
    rows = [{**base, "JobId": str(i), "ArrayJobId": str(i), "Name": f"j{i}"} for i in range(1, 4)]
    reader = SqueueFormatReader()
    first = reader.read(render(spec, rows), sep, end)
    rows[1] = {**rows[1], "State": "RUNNING", "Reason": "None", "StartTime": "1735725600"}
    second = reader.read(render(spec, rows), sep, end)
    assert second[0] is first[0] and second[2] is first[2]  # the same objects: not parsed again
    assert second[1] is not first[1] and (second[1].state, second[1].start_time) == ("RUNNING", 1735725600.0)
    rows.pop(0)  # a job gone from squeue is forgotten: the reader holds the last output's jobs only
    third = reader.read(render(spec, rows), sep, end)
    assert [j.job_id for j in third] == ["2", "3"] and len(reader._known) == 2
