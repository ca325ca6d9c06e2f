"""A node reported faulty (reportFaultyNodes) goes straight to the replace rung: the report
says its hardware is bad, which a restart or a reimage would not cure; a crash still starts
with a restart."""

from jupyter_gtc.health import ladder


def test_a_reported_node_is_replaced_first_and_given_up_on_when_replace_is_spent():
    reported = [{"time": 100.0, "node": "a3-1", "event": "detected", "detail": "reported faulty: gtc-reported: x"}]
    assert ladder.next_action(reported, 101.0).action == "replace"
    failed = reported + [{"time": 102.0, "node": "a3-1", "event": "replace failed", "detail": "no slot"}]
    assert ladder.next_action(failed, 200.0).action == "give up"
    crashed = [{"time": 100.0, "node": "a3-1", "event": "detected", "detail": ladder.CRASH_DETAIL}]
    assert ladder.next_action(crashed, 101.0).action == "restart"
    # An episode opened by the health check after an earlier report climbs the whole ladder again.
    later = failed + [{"time": 300.0, "node": "a3-1", "event": "healthy", "detail": ""},
                      {"time": 400.0, "node": "a3-1", "event": "detected", "detail": "drained by its health check"}]
    assert ladder.next_action(later, 401.0).action == "restart"
