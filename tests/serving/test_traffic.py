"""An endpoint's last minute in figures (serving/traffic.py), as the sidebar's Models section
shows it: from the tail of a real requests.jsonl, a line still being written left out."""

from __future__ import annotations

import json

import pytest

from jupyter_gtc.serving.traffic import read_tail, summarize

NOW = 1_000_000.0


def write(path, records, partial: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + partial)


def test_rate_latency_quantiles_and_errors_of_the_last_minute(tmp_path):
    path = tmp_path / "requests.jsonl"
    old = [{"time": NOW - 300, "status": 200, "seconds": 9.0, "replica": "1"}]  # before the window: left out
    ok = [{"time": NOW - 60 + i * 3, "status": 200, "seconds": s, "replica": "1"}
          for i, s in enumerate([0.1 * k for k in range(1, 20)])]
    refused = [{"time": NOW - 1, "status": 429, "seconds": 0.001, "replica": None}]
    write(path, old + ok + refused, partial='{"time": 999999.5, "sta')
    figures = summarize(read_tail(path), NOW)
    assert figures["requests"] == 20 and figures["errors"] == 1
    assert figures["rate"] == pytest.approx(20 / 60)
    assert figures["p50"] == pytest.approx(1.0)  # the 10th of 19 answered: a latency one request had
    assert figures["p95"] == pytest.approx(1.9)


def test_a_new_endpoint_counts_from_its_first_request_and_a_cut_tail_from_its_oldest_line(tmp_path):
    path = tmp_path / "requests.jsonl"
    write(path, [{"time": NOW - 10 + i, "status": 200, "seconds": 0.2, "replica": "1"} for i in range(10)])
    assert summarize(read_tail(path), NOW)["rate"] == pytest.approx(1.0)  # 10 in 10 s, not 10 in 60
    cut = read_tail(path, limit=200)  # the first whole line after the cut, on
    assert 0 < len(cut) < 10 and cut[-1]["time"] == NOW - 1
    assert summarize(cut, NOW)["rate"] == pytest.approx(len(cut) / (NOW - cut[0]["time"]))


def test_no_requests_yet(tmp_path):
    assert read_tail(tmp_path / "missing.jsonl") == []
    assert summarize([], NOW) == {"window": 60.0, "requests": 0, "rate": 0.0, "p50": None, "p95": None, "errors": 0}
