"""An endpoint's recent traffic in a few figures (requests/s, p50/p95 latency, errors), read from
the tail of its front's ``requests.jsonl``: what the sidebar's Models section shows of each
endpoint. Only the file's last ``TAIL_BYTES`` are read, so a long-lived endpoint costs the same
as a new one; where that tail holds less than the window, the figures cover the span it holds.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

WINDOW = 60.0  # s of requests the figures cover, as Vertex's console charts show a minute
TAIL_BYTES = 256 * 1024  # about 2,800 requests: a minute at 45 requests/s


def read_tail(path: Path, limit: int = TAIL_BYTES) -> list[dict[str, Any]]:
    """The whole records among ``path``'s last ``limit`` bytes (the first line may be cut: dropped;
    the last may be being written: dropped unless it ends the line). A missing file has none."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - limit)
            f.seek(start)
            data = f.read(size - start)
    except FileNotFoundError:
        return []
    if start > 0:
        data = data.partition(b"\n")[2]
    return parse_lines(data.rpartition(b"\n")[0])  # the part after the last newline is not a whole record yet


def parse_lines(whole: bytes) -> list[dict[str, Any]]:
    """The records of ``whole`` lines of ``requests.jsonl`` (what the sidebar's figures and
    ``ep.plot()`` both read); a line that is not a whole record of ours is skipped."""
    records = []
    for line in whole.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def summarize(records: list[dict[str, Any]], now: float, window: float = WINDOW) -> dict[str, Any]:
    """``{"window", "requests", "rate", "p50", "p95", "errors"}`` of the records of the last
    ``window`` seconds: rate in requests/s, p50/p95 in seconds over the answered ones (status
    200; None with none), errors those answered otherwise (a 400, a 429, a replica's 5xx)."""
    recent = [r for r in records if now - window <= r.get("time", 0) <= now + 1]
    span = window
    if recent and len(recent) == len(records):  # a new endpoint, or a tail that does not reach back a window
        span = min(window, max(1.0, now - recent[0]["time"]))
    ok = sorted(r["seconds"] for r in recent if r.get("status") == 200)
    return {"window": window, "requests": len(recent), "rate": len(recent) / span,
            "p50": quantile(ok, 0.5), "p95": quantile(ok, 0.95),
            "errors": sum(1 for r in recent if r.get("status") != 200)}


def quantile(ordered: list[float], q: float) -> float | None:
    """The nearest-rank quantile (``q`` in 0..1) of sorted values: a latency some request really
    had, not one between two; None for none."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]
