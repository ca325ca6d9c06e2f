"""The remediation ladder of one node: which action comes next, from what was done to it.

    drain -> restart (its slurmd) -> reimage (its local state wiped) -> replace (a fresh node)
          -> give up (it stays out, saying why, until someone starts it again)

Pure: the supervisor passes the node's events (the rows of ``cluster_events``, so a
supervisor started again decides as its predecessor would have) and the time. A fault is an
*episode*, from its "detected" event to the event that closes it. Within an episode each rung
is tried once, lowest first: a restart that did not cure a failing health check is not tried
again, a reimage comes next. Across episodes each rung has an attempt limit within a window
(a node that crashes again and again is restarted ``restart`` times, then reimaged); a
replaced node is new hardware, so the restarts and reimages of the one before it no longer
count. Between two actions on a node there is a cool-down, so a node that fails again at
once is not hammered, and an action's effect (a node registering, its checks running) can
show first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RUNGS = ("restart", "reimage", "replace")
DONE = {"restart": "restarted", "reimage": "reimaged", "replace": "replaced"}  # the event of each rung done
FAILED = {rung: f"{rung} failed" for rung in RUNGS}                          # and of each that failed
ACTIONS = {**{v: k for k, v in DONE.items()}, **{v: k for k, v in FAILED.items()}}  # event -> rung
# Events that end an episode, whatever its kind: the node passed its checks, we gave up,
# someone started it again by hand, or someone took it out for a reason of their own. A crash's episode also ends with the action that started
# its slurmd again (an action succeeds only once the node has registered).
CLOSING = frozenset({"healthy", "gave up", "back", "left alone"})
CRASH_DETAIL = "its slurmd exited"  # the "detected" event of a crash begins so
# A node reported faulty (Vertex's reportFaultyNodes, served by the local endpoint) is drained
# with this reason; its episode's "detected" event begins with REPORTED_DETAIL, and its ladder
# is the replace rung alone: a report says the hardware is bad, so a restart would not cure it.
REPORTED_REASON = "gtc-reported:"
REPORTED_DETAIL = "reported faulty"


@dataclass(frozen=True)
class Limits:
    attempts: dict[str, int] = field(default_factory=lambda: {"restart": 3, "reimage": 1, "replace": 1})
    window_s: float = 600.0   # attempts older than this no longer count
    cooldown_s: float = 30.0  # at least this long between two actions on one node


@dataclass(frozen=True)
class Decision:
    action: str          # a rung, "wait" (cooling down) or "give up"
    why: str             # a line for the event's detail
    until: float = 0.0   # for "wait": when the cool-down ends


def open_episode(events: list[dict]) -> str | None:
    """The kind of the node's episode still open ("crash" or "health"), None when none is:
    its last "detected" event and no closing one after it. ``events``: the node's, oldest first."""
    kind = None
    for e in events:
        if e["event"] == "detected":
            kind = "crash" if e["detail"].startswith(CRASH_DETAIL) else "health"
        elif e["event"] in CLOSING or (kind == "crash" and e["event"] in DONE.values()):
            kind = None
    return kind


def next_action(events: list[dict], now: float, limits: Limits = Limits()) -> Decision:
    """What to do next about a node whose episode is open. ``events``: the node's, oldest first."""
    started = max((e["time"] for e in events if e["event"] == "detected"), default=0.0)
    actions = [e for e in events if e["event"] in ACTIONS]
    if actions and now - actions[-1]["time"] < limits.cooldown_s:
        until = actions[-1]["time"] + limits.cooldown_s
        return Decision("wait", f"cooling down until {limits.cooldown_s:g} s after its last action", until)
    tried = {ACTIONS[e["event"]] for e in actions if e["time"] >= started}
    replaced = max((e["time"] for e in actions if e["event"] == DONE["replace"]), default=0.0)
    detected = [e for e in events if e["event"] == "detected"]
    reported = bool(detected) and detected[-1]["detail"].startswith(REPORTED_DETAIL)
    for rung in ("replace",) if reported else RUNGS:
        since = now - limits.window_s if rung == "replace" else max(now - limits.window_s, replaced)
        used = sum(1 for e in actions if ACTIONS[e["event"]] == rung and e["time"] >= since)
        if rung not in tried and used < limits.attempts.get(rung, 0):
            return Decision(rung, f"{rung} {used + 1} of {limits.attempts[rung]} within {limits.window_s:g} s")
    spent = ", ".join(f"{limits.attempts.get(r, 0)} {r}" for r in RUNGS)
    return Decision("give up", f"every rung tried or at its limit ({spent} within {limits.window_s:g} s)")
