"""The remediation ladder's decisions, from a node's events alone (health/ladder.py)."""

from __future__ import annotations

from jupyter_gtc.health.ladder import CRASH_DETAIL, Limits, next_action, open_episode

LIMITS = Limits(cooldown_s=10, window_s=600)


def ev(t: float, event: str, detail: str = "") -> dict:
    return {"time": t, "event": event, "detail": detail}


def crash(t: float) -> dict:
    return ev(t, "detected", CRASH_DETAIL)


def health(t: float) -> dict:
    return ev(t, "detected", "drained by its health check: gtc-health: ecc: injected")


def test_a_failing_health_check_climbs_one_rung_per_failed_verification_after_the_cooldown():
    events = [health(0), ev(0, "requeued")]
    assert next_action(events, 1, LIMITS).action == "restart"
    events += [ev(1, "restarted"), ev(3, "still failing")]
    wait = next_action(events, 5, LIMITS)
    assert wait.action == "wait" and wait.until == 11
    assert next_action(events, 11, LIMITS).action == "reimage"  # a restart did not cure it: not again
    events += [ev(11, "reimaged"), ev(13, "still failing")]
    assert next_action(events, 21, LIMITS).action == "replace"
    events += [ev(21, "replaced"), ev(23, "still failing")]
    given = next_action(events, 31, LIMITS)
    assert given.action == "give up" and "3 restart, 1 reimage, 1 replace" in given.why


def test_a_node_that_crashes_again_and_again_is_restarted_up_to_the_limit_then_reimaged_then_replaced():
    events: list[dict] = []
    t = 0.0
    # A replaced node is new hardware: its predecessor's restarts and reimages no longer count;
    # its own replace does, within the window.
    for expected in ("restart", "restart", "restart", "reimage", "replace",
                     "restart", "restart", "restart", "reimage", "give up"):
        t += 20
        events.append(crash(t))
        decision = next_action(events, t, LIMITS)
        assert decision.action == expected, (expected, decision)
        events.append(ev(t, {"restart": "restarted", "reimage": "reimaged", "replace": "replaced"}.get(expected,
                                                                                                      "gave up")))
    # After the window, every attempt is forgotten.
    later = [*events, ev(t + 700, "back"), crash(t + 700)]
    assert next_action(later, t + 700, LIMITS).action == "restart"


def test_a_failed_action_counts_as_tried_and_the_next_rung_follows():
    events = [crash(0), ev(1, "restart failed", "slurmd of gpu-1 exited")]
    assert next_action(events, 5, LIMITS).action == "wait"
    assert next_action(events, 11, LIMITS).action == "reimage"


def test_which_episode_is_open():
    assert open_episode([]) is None
    assert open_episode([crash(0)]) == "crash"
    assert open_episode([crash(0), ev(1, "down"), ev(2, "restarted")]) is None  # a crash ends at its restart
    assert open_episode([health(0), ev(1, "restarted"), ev(2, "still failing")]) == "health"
    assert open_episode([health(0), ev(1, "replaced"), ev(2, "healthy")]) is None
    assert open_episode([crash(0), ev(1, "gave up"), ev(9, "back")]) is None
    assert open_episode([health(0), ev(1, "left alone")]) is None  # an admin took it meanwhile
