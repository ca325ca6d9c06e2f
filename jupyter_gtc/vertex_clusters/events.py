"""A Vertex AI training cluster's own events (``clusterEvents``: ``VM_SLURM_DRAIN``,
``VM_REPORT_AND_REPLACEMENT``, ...) as rows of the History the sidebar and ``gtc cluster
events`` show: ``{time, node, event, detail}``, oldest first.

Google keeps the newest 100 in the resource, newest first, so each poll sees a window that
overlaps the last one and drops the oldest as new ones come. What was seen is kept here, one
file per cluster (``GTC_HOME/vertex_clusters/<id>.events.json``, 0600, replaced whole), merged
with each poll's window: an event is shown once however many polls saw it, and stays in the
History after it left Google's window. The file names the cluster's ``createTime``: a cluster
made again under the same id starts with an empty History, as a local one does.

The event is Vertex's ``eventType`` as it says it (what Google's documentation names), the node
its ``instanceName`` and the detail its ``description`` (the drain's or the report's reason).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ..slurm.parse import NodeStatus

KEPT = 1000  # events of one cluster kept across polls, the newest: a History, not an archive
# When this process last merged a poll into each log (time.monotonic()): the sidebar asks for a
# cluster's events right after listing it, and the list's get already brought them.
_merged_at: dict[Path, float] = {}
UP = {"RUNNING", "IDLE", "MIXED", "ALLOCATED"}  # node states with no drain to explain


def history_rows(cluster_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``clusterEvents`` (newest first, as Google gives them) as History rows, oldest first; an
    event without a time it can be placed by is left out (nothing to order it by)."""
    rows = []
    for raw in reversed([e for e in cluster_events or [] if isinstance(e, dict)]):
        when = parse_time(_field(raw, "eventTime", "event_time") or _field(raw, "createTime", "create_time"))
        if when is None:
            continue
        node = _field(raw, "instanceName", "instance_name") or _field(raw, "nodeId", "node_id") or ""
        rows.append({"time": when, "node": str(node), "event": str(_field(raw, "eventType", "event_type") or "UNKNOWN"),
                     "detail": str(_field(raw, "description", "description") or "")})
    rows.sort(key=lambda r: r["time"])  # stable: events of one instant keep Google's order
    return _unique(rows)


def with_drain_reasons(nodes: list[NodeStatus], events: list[dict[str, Any]]) -> list[NodeStatus]:
    """``nodes`` with the reason of each that is not up: its newest drain event's detail (Vertex's
    ``nodesStatus`` says a node's state, not why). A node that is up keeps no reason."""
    reasons = {e["node"]: e["detail"] for e in events if "DRAIN" in e["event"]}
    return [replace(n, reason=n.reason or reasons.get(n.name)) if n.state.upper() not in UP else n
            for n in nodes]


def parse_time(text: Any) -> float | None:
    """An RFC 3339 time as Google writes it (``2026-12-04T23:26:11.123456789Z``) in seconds
    since the epoch; None for anything else."""
    if not isinstance(text, str) or "T" not in text:
        return None
    value = text.strip().replace("z", "Z").replace("Z", "+00:00")
    whole, dot, rest = value.partition(".")
    if dot:  # Python reads at most microseconds: Google may give nanoseconds
        digits = len(rest) - len(rest.lstrip("0123456789"))
        value = f"{whole}.{rest[:min(digits, 6)]}{rest[digits:]}"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo else None


class EventLog:
    """The events of training cluster ``cluster_id`` seen so far, kept under ``home``."""

    def __init__(self, home: Path, cluster_id: str):
        self.path = Path(home) / "vertex_clusters" / f"{cluster_id}.events.json"

    def read(self) -> list[dict[str, Any]]:
        """What is kept, oldest first."""
        return self._kept()[1]

    def recent(self, max_age: float) -> list[dict[str, Any]] | None:
        """What is kept, where this process merged a poll into it in the last ``max_age`` seconds
        (no need to ask Vertex again); else None."""
        merged = _merged_at.get(self.path)
        return self.read() if merged is not None and time.monotonic() - merged < max_age else None

    def merge(self, cluster: dict[str, Any]) -> list[dict[str, Any]]:
        """Add the events of ``cluster`` (the resource a get returned) to those kept, once each;
        return them all, oldest first. The file is rewritten only when something was new."""
        create_time = cluster.get("createTime") or cluster.get("create_time") or ""
        made, kept = self._kept()
        if made != create_time:
            kept = []  # another cluster of that id: its History is not this one's
        merged = _unique(sorted(kept + history_rows(_field(cluster, "clusterEvents", "cluster_events") or []),
                                key=lambda r: r["time"]))[-KEPT:]
        if merged != kept or made != create_time:
            self._write({"create_time": create_time, "events": merged})
        _merged_at[self.path] = time.monotonic()
        return merged

    def _kept(self) -> tuple[str | None, list[dict[str, Any]]]:
        try:
            kept = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None, []
        if not isinstance(kept, dict):
            return None, []
        return kept.get("create_time"), [e for e in kept.get("events") or [] if isinstance(e, dict)]

    def _write(self, data: dict[str, Any]) -> None:
        # Made 0700/0600 from the start (mkstemp's own mode), then put in place whole, so another
        # process polling the same cluster (the sidebar's server, `gtc`) never reads half a file.
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".events-")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(data, out)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def _unique(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for row in rows:
        key = (row["time"], row["node"], row["event"], row["detail"])
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _field(data: dict[str, Any], camel: str, snake: str) -> Any:
    return data.get(camel, data.get(snake))


__all__ = ["EventLog", "history_rows", "parse_time", "with_drain_reasons"]
