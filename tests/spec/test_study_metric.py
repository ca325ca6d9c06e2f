"""A study's metric is any TensorBoard or hypertune tag (``train/loss``, ``eval.top-1``,
``val:acc``), written NAME:GOAL with the goal after the last colon. Pure: no cluster."""

from __future__ import annotations

import pytest

from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.spec.study import parse_tuning_spec

CELL = 'parameters: {lr: {double: [0.001, 0.1]}}\njob: srun python train.py "$@"\n'


@pytest.mark.parametrize(("metric", "tag", "direction"), [
    ("train/loss:minimize", "train/loss", "minimize"),
    ("eval.top-1/acc:maximize", "eval.top-1/acc", "maximize"),
    ("val:acc:MAXIMIZE", "val:acc", "maximize"),  # a colon in the tag: the goal follows the last one
    ("loss/total (ema):minimize", "loss/total (ema)", "minimize"),
])
def test_any_tag_is_a_metric_as_the_magic_passes_it(metric, tag, direction):
    spec = parse_tuning_spec(CELL, metric=metric, max_trials=2)  # what `%%gtc_tune --metric ...` does
    assert (spec.metric.metric_id, spec.metric.direction) == (tag, direction)
    assert spec.to_vertex()["studySpec"]["metrics"] == [{"metricId": tag, "goal": direction.upper()}]


def test_a_tag_with_a_slash_in_the_cell_and_in_a_vertex_spec():
    spec = parse_tuning_spec(CELL + "metric: train/loss:minimize\nmax_trials: 2\n")
    assert spec.metric.metric_id == "train/loss"
    again = parse_tuning_spec(spec.to_vertex())  # the same study as a HyperparameterTuningJob
    assert (again.metric.metric_id, again.metric.direction) == ("train/loss", "minimize")


@pytest.mark.parametrize(("metric", "field", "expected"), [
    ("train/loss", "metric", "NAME:minimize or NAME:maximize"),  # no goal
    ("train/loss:lowest", "metric", "NAME:minimize or NAME:maximize"),
    (":minimize", "metric", "NAME:minimize or NAME:maximize"),
])
def test_a_metric_without_a_goal_says_how_to_write_one(metric, field, expected):
    with pytest.raises(SpecErrors) as info:
        parse_tuning_spec(CELL, metric=metric, max_trials=2)
    assert {e.field: e.expected for e in info.value.errors}[field].startswith("write " + expected)


@pytest.mark.parametrize("tag", ["val_loss\n", "train\tloss", " loss", "x" * 257])
def test_a_tag_no_writer_could_have_written_is_refused_saying_what_a_tag_is(tag):
    body = parse_tuning_spec(CELL, metric="m:minimize", max_trials=2).to_vertex()
    body["studySpec"]["metrics"][0]["metricId"] = tag
    with pytest.raises(SpecErrors) as info:
        parse_tuning_spec(body)
    (error,) = info.value.errors
    assert error.field == "study_spec.metrics[0].metric_id" and error.value == tag
    assert error.expected.startswith("a tag as TensorBoard or hypertune writes it: up to 256 printable characters")
