"""Event decoding, checked against TensorBoard's own loader on files from real writers."""

from __future__ import annotations

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2, histogram_pb2, summary_pb2

from jupyter_gtc.metrics.events import EventDecoder, decode_events
from jupyter_gtc.metrics.reader import read_metrics

from .helpers import file_bytes, points, reference_scalars, tf2_event, write_torch


def tensorboard_scalars(log_dir) -> set[tuple]:
    """(run, tag, step, wall_time, value) as TensorBoard's scalars plugin would load them."""
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea
    from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
    from tensorboard.util import tensor_util

    mux = pem.EventMultiplexer(size_guidance={pea.TENSORS: 0})
    mux.AddRunsFromDirectory(str(log_dir))
    mux.Reload()
    out = set()
    for run, tags in mux.PluginRunToTagToContent("scalars").items():
        for tag in tags:
            for t in mux.Tensors(run, tag):
                value = tensor_util.make_ndarray(t.tensor_proto).item()
                out.add(("" if run == "." else run, tag, t.step, t.wall_time, value))
    return out


def test_same_scalars_as_tensorboard_for_every_writer(tmp_path):
    from tensorboard.summary import Writer as TensorBoardWriter
    from tensorboardX import SummaryWriter as XWriter
    from torch.utils.tensorboard import SummaryWriter

    pts = points(50)
    write_torch(tmp_path, pts)                                   # simple_value
    write_torch(tmp_path / "torch_new_style", pts, new_style=True)  # tensor float_val
    write_torch(tmp_path / "torch_double", pts, new_style=True, double_precision=True)
    x = XWriter(str(tmp_path / "tbx"))
    for tag, step, value in pts:
        x.add_scalar(tag, value, step)
    x.close()
    tb = TensorBoardWriter(str(tmp_path / "tb_writer"))          # tensor, metadata each time
    for tag, step, value in pts:
        tb.add_scalar(tag, value, step)
    tb.close()
    tf2 = [tf2_event(tag, step, value, metadata=step == 0, double=(tag == "acc"),
                     content=step % 2 == 0, wall_time=1.7e9 + step)
           for tag, step, value in pts]
    (tmp_path / "tf2").mkdir()
    (tmp_path / "tf2" / "events.out.tfevents.1.host").write_bytes(file_bytes(tf2))
    # Non-scalar data in a run must not turn into scalars.
    w = SummaryWriter(str(tmp_path / "mixed"))
    w.add_histogram("weights", np.arange(10.0), 0)
    w.add_text("note", "hello", 0)
    w.add_scalar("loss", 1.5, 0)
    w.close()

    ours = read_metrics(tmp_path)
    ours_set = {(s.run, s.tag, s.step, s.wall_time, s.value) for s in ours}
    assert len(ours_set) == len(ours)  # nothing read twice
    assert ours_set == tensorboard_scalars(tmp_path)
    assert {s.run for s in ours} == {"", "torch_new_style", "torch_double", "tbx",
                                     "tb_writer", "tf2", "mixed"}
    assert len(ours) == 6 * len(pts) + 1


def event(**kw) -> bytes:
    return event_pb2.Event(**kw).SerializeToString()


def test_edge_cases_of_the_wire_format():
    e = event_pb2.Event(wall_time=12.5, step=-3)
    e.summary.value.add(tag="t" * 200, simple_value=1.0)         # two-byte length
    e.summary.value.add(tag="ünï/cødé", simple_value=-2.0)
    e.summary.value.add(tag="n", node_name="x", simple_value=3.0)  # unknown field first
    big = event_pb2.Event(wall_time=1.0, step=2**62)
    big.summary.value.add(tag="big", simple_value=4.0)
    histo = event_pb2.Event(step=1)
    histo.summary.value.add(tag="h", histo=histogram_pb2.HistogramProto(min=1, max=2))
    records = [event(file_version="brain.Event:2"), e.SerializeToString(),
               big.SerializeToString(), histo.SerializeToString(),
               event(step=5, log_message=event_pb2.LogMessage(message="hi"))]
    got = [(s.tag, s.step, s.wall_time, s.value) for s in decode_events(records)]
    assert got == [("t" * 200, -3, 12.5, 1.0), ("ünï/cødé", -3, 12.5, -2.0),
                   ("n", -3, 12.5, 3.0), ("big", 2**62, 1.0, 4.0)]


def test_only_one_element_float_tensors_of_scalar_tags_count():
    vector = tf2_event("v", 0, 1.0, metadata=True)
    vector.summary.value[0].tensor.tensor_shape.dim.add(size=2)
    vector.summary.value[0].tensor.tensor_content = np.float32([1, 2]).tobytes()
    one = tf2_event("one", 0, 7.0, metadata=True)
    one.summary.value[0].tensor.tensor_shape.dim.add(size=1)      # shape [1]: one value
    ints = tf2_event("i", 0, 1.0, metadata=True)
    ints.summary.value[0].tensor.dtype = 3                        # DT_INT32
    other = tf2_event("img", 0, 1.0, metadata=False)
    other.summary.value[0].metadata.plugin_data.plugin_name = "images"
    later = tf2_event("img", 1, 1.0, metadata=True)               # first metadata wins
    unknown = tf2_event("nometa", 0, 1.0, metadata=False)
    records = [x.SerializeToString() for x in (vector, one, ints, other, later, unknown)]
    assert [(s.tag, s.value) for s in decode_events(records)] == [("one", 7.0)]


def test_a_record_that_is_no_event_is_counted_and_skipped(caplog):
    decoder = EventDecoder("r")
    good = event_pb2.Event(step=1)
    good.summary.value.add(tag="a", simple_value=1.0)
    out = []
    decoder.decode([b"\x2a\xff\xff\xff\x7f", b"\x0a", good.SerializeToString()], out)
    assert [(s.tag, s.run) for s in out] == [("a", "r")]
    assert decoder.undecodable == 2 and "undecodable" in caplog.text


def random_event(rng: np.random.Generator) -> event_pb2.Event:
    """An event with 0-3 values of every kind we read or must skip."""
    e = event_pb2.Event(wall_time=float(rng.uniform(0, 2e9)), step=int(rng.integers(-2**40, 2**40)))
    for _ in range(int(rng.integers(0, 4))):
        tag = f"tag{rng.integers(0, 8)}/{'x' * int(rng.integers(0, 150))}"
        value = float(np.float32(rng.normal()))
        kind = rng.integers(0, 4)
        if kind == 0:
            e.summary.value.add(tag=tag, simple_value=value)
            continue
        v = tf2_event(tag, 0, value, metadata=bool(rng.integers(0, 2)), double=kind == 2,
                      content=bool(rng.integers(0, 2))).summary.value[0]
        if rng.integers(0, 5) == 0:
            v.metadata.plugin_data.plugin_name = "histograms"
            v.metadata.data_class = summary_pb2.DATA_CLASS_TENSOR
        if rng.integers(0, 5) == 0:
            v.tensor.tensor_shape.dim.add(size=int(rng.integers(1, 3)))
        if kind == 3:
            v.tensor.dtype = int(rng.choice([3, 9, 19]))  # int32, int64, half
        e.summary.value.append(v)
    return e


@pytest.mark.parametrize("seed", range(5))
def test_agrees_with_protobuf_on_random_events(seed):
    rng = np.random.default_rng(seed)
    records = [random_event(rng).SerializeToString() for _ in range(500)]
    got = [(s.tag, s.step, s.wall_time, s.value) for s in decode_events(records)]
    expected = reference_scalars(records)
    assert got == expected
    assert len(expected) > 200  # the stream is not all skipped values
