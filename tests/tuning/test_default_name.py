"""The name a study gets where the user gives none: pure, no cluster."""

from __future__ import annotations

import time

from jupyter_gtc.services.tuning.service import NAME_RE, default_name
from jupyter_gtc.spec.study import parse_tuning_spec
from tests.tuning.conftest import short_spec

MORNING = time.mktime((2026, 12, 1, 9, 5, 30, 0, 0, -1))  # 1 December, 09:05 local time


def spec(extra: str = "", metric: str = "val_loss"):
    data = short_spec("{x: {double: [0, 1]}}", trials=2, extra=extra)
    data["metric"] = f"{metric}:minimize"
    return parse_tuning_spec(data)


def test_the_metric_and_the_minute_it_starts():
    assert default_name(spec(), set(), MORNING) == "val_loss-1201-0905"


def test_a_taken_name_gets_the_next_number():
    taken = {"val_loss-1201-0905", "val_loss-1201-0905-2"}
    assert default_name(spec(), taken, MORNING) == "val_loss-1201-0905-3"


def test_a_metric_becomes_a_valid_short_stem():
    for metric, stem in [("eval/loss", "eval-loss"), ("_top 1 accuracy", "top-1-accuracy"), ("///", "study"),
                         ("a" * 40, "a" * 24)]:
        name = default_name(spec(metric=metric), set(), MORNING)
        assert name == f"{stem}-1201-0905" and NAME_RE.fullmatch(name), (metric, name)


def test_the_display_name_wins_and_stays_valid_when_numbered():
    assert default_name(spec("name: sweep-7\n"), set(), MORNING) == "sweep-7"
    long = "s" * 63
    numbered = default_name(spec(f"name: {long}\n"), {long}, MORNING)
    assert numbered == "s" * 61 + "-2" and NAME_RE.fullmatch(numbered)
    assert default_name(spec("name: 'not valid!'\n"), set(), MORNING) == "val_loss-1201-0905"
