"""The cluster panel (pools, nodes with their state and drain reason, GPUs in use, the
remediation history of its nodes) and the progress line shown while a cluster is created or
scaled.

The cluster panel shows the ``api.Cluster`` it is given and the cluster's events
(``api.cluster_events``: what its supervisor noticed and did); its Refresh button asks for
both again. Nothing here polls.
"""

from __future__ import annotations

import html
import time

import ipywidgets as w

from .. import api
from ..exceptions import GtcError

_MUTED = "color:#57606a"
_TABLE = "border-collapse:collapse; margin:0.3em 0; font-size:90%"
_CELL = "padding:0.15em 0.8em 0.15em 0; text-align:left"
EVENTS_SHOWN = 50  # the newest events the Remediation section lists; api.cluster_events has all


class ClusterPanel(w.VBox):
    """What a cluster is made of and how its nodes are doing, as of the last refresh."""

    def __init__(self, cluster: api.Cluster):
        self.summary_html = w.HTML(layout=w.Layout(margin="0 1em 0 0"))
        self.pools_html = w.HTML()
        self.nodes_html = w.HTML()
        self.refresh_button = w.Button(description="Refresh", icon="refresh", layout=w.Layout(width="auto"))
        self.refresh_button.on_click(lambda _button: self.refresh())
        header = w.HBox([self.summary_html, self.refresh_button], layout=w.Layout(align_items="center"))
        self.events_html = w.HTML()
        # Collapsed while there is nothing to list; opened once when the first event shows
        # (a fault is news), and left as the user set it after that.
        self.remediation = w.Accordion([self.events_html], titles=("Remediation",), selected_index=None)
        self.events: list[dict] = []
        super().__init__([header, self.pools_html, self.nodes_html, self.remediation])
        self.cluster = cluster
        self.show(cluster)
        self._read_events()

    def refresh(self) -> None:
        """Ask for the cluster's live status and its events again and show them."""
        try:
            self.show(api.get_cluster(self.cluster.name))
        except GtcError as e:  # e.g. deleted meanwhile: say so in place of the summary
            self.summary_html.value = f"<b>{html.escape(self.cluster.name)}</b> &nbsp;{html.escape(str(e))}"
            return
        self._read_events()

    def _read_events(self) -> None:
        try:
            events = api.cluster_events(self.cluster.name)
        except GtcError as e:  # the history is a side show: say why it is missing, keep the rest
            self.events_html.value = f"<span style='{_MUTED}'>{html.escape(str(e))}</span>"
            return
        self.show_events(events)

    def show_events(self, events: list[dict]) -> None:
        """List ``events`` (oldest first, as ``api.cluster_events`` gives them) newest first:
        local time, node, event, detail; the newest ``EVENTS_SHOWN`` only."""
        first = not self.events and events
        self.events = events
        self.remediation.set_title(0, f"Remediation ({len(events)})" if events else "Remediation")
        if not events:
            self.events_html.value = f"<span style='{_MUTED}'>Nothing has happened to the nodes yet.</span>"
            return
        shown = events[::-1][:EVENTS_SHOWN]
        rows = [[time.strftime("%H:%M:%S", time.localtime(e["time"])), e["node"], e["event"], e.get("detail") or ""]
                for e in shown]
        more = len(events) - len(shown)
        self.events_html.value = _table(["time", "node", "event", "detail"], rows) + (
            f"<span style='{_MUTED}'>and {more} older; "
            f"{html.escape(f'api.cluster_events({self.cluster.name!r})')} has every one</span>" if more else "")
        if first:
            self.remediation.selected_index = 0

    def show(self, cluster: api.Cluster) -> None:
        self.cluster = cluster
        nodes = cluster.nodes
        ready = sum(n.ready for n in nodes)
        gpus_used = sum(n.gpus_allocated for n in nodes)
        gpus = sum(n.gpus for n in nodes) if nodes else cluster.gpu_count
        problem = cluster.problem
        self.summary_html.value = (
            f"<b>{html.escape(cluster.name)}</b> &nbsp;<span style='{_MUTED}'>{html.escape(cluster.backend)}</span>"
            f" &nbsp;{html.escape(cluster.state)} &nbsp;·&nbsp; nodes ready {ready}/{cluster.node_count}"
            f" &nbsp;·&nbsp; GPUs used {gpus_used}/{gpus}"
            + (f"<br><span style='color:#cf222e'>{html.escape(problem)}</span>" if problem else "")
            + "".join(f"<br><span style='{_MUTED}'>not applied: {html.escape(str(item))}</span>"
                      for item in cluster.not_applied))
        if cluster.attached:  # its own partitions and nodes, as Slurm says: it has no pools of ours
            details = cluster.status.details if cluster.status else {}
            self.pools_html.value = (
                f"<span style='{_MUTED}'>login {html.escape(str(details.get('login', '')))} &middot; Slurm "
                f"{html.escape(str(details.get('slurm_version', '?')))}</span>" + _table(
                    ["partition", "nodes", "GPUs per node"],
                    [[p.name + (" (default)" if p.default else ""), len(p.nodes),
                      "/".join(map(str, sorted(set(p.node_gpus)))) or "-"] for p in cluster.partitions]))
            group, group_of = "partitions", {n.name: ",".join(n.partitions) for n in nodes}
        else:
            login = cluster.spec.slurm.login_node_pool_id
            self.pools_html.value = _table(
                ["pool", "role", "machine type", "nodes", "GPUs per node"],
                [[p.id, "login" if p.id == login else "compute", p.machine_spec.machine_type, p.node_count,
                  p.machine.gpu_count] for p in cluster.spec.node_pools])
            group, group_of = "pool", {name: p.id for p in cluster.spec.node_pools for name in p.node_names()}
        self.nodes_html.value = _table(
            ["node", group, "state", "reason", "GPUs used", "CPUs used"],
            [[n.name, group_of.get(n.name, "-"), n.display_state, n.reason or "",
              f"{n.gpus_allocated}/{n.gpus}", f"{n.cpus_allocated}/{n.cpus}"] for n in nodes])

    def __repr__(self) -> str:  # what a terminal, or a notebook without widgets, shows
        c = self.cluster
        return f"<Cluster {c.name} ({c.backend}) {c.state}: {sum(n.ready for n in c.nodes)}/{c.node_count} nodes ready>"


class ClusterProgress(w.VBox):
    """Shown while a cluster is created or scaled. It is itself the ``progress`` callable the
    api takes: each call adds one step; ``finish`` folds the steps into one line."""

    def __init__(self, title: str):
        self.title = title
        self.steps: list[str] = []
        self.bar = w.IntProgress(value=0, max=1, bar_style="info", layout=w.Layout(width="12em", margin="0 1em 0 0"))
        self.message_label = w.Label(title)
        super().__init__([w.HBox([self.bar, self.message_label], layout=w.Layout(align_items="center"))])
        self._started = time.monotonic()

    def __call__(self, message: str) -> None:
        self.steps.append(message)
        # The number of steps is not known in advance: keep the bar moving without filling it.
        self.bar.max = len(self.steps) + 1
        self.bar.value = len(self.steps)
        self.message_label.value = f"{self.title}: {message}"

    def __repr__(self) -> str:  # what a terminal shows
        return self.message_label.value

    def finish(self, error: str | None = None) -> None:
        seconds = time.monotonic() - self._started
        self.bar.max, self.bar.value = 1, 1
        self.bar.bar_style = "danger" if error else "success"
        self.message_label.value = (f"{self.title} failed: {error}" if error
                                    else f"{self.title}: done in {seconds:.1f} s ({len(self.steps)} steps)")


def _table(columns: list[str], rows: list[list]) -> str:
    head = "".join(f"<th style='{_CELL}; {_MUTED}'>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td style='{_CELL}'>{html.escape(str(v))}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table style='{_TABLE}'><tr>{head}</tr>{body}</table>"
