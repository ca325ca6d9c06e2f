"""``job.metrics()``'s table (``services.metrics.as_table``): wall_time as a timestamp a person
reads, and a run column only where there is more than one run."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

from jupyter_gtc.metrics import Scalar
from jupyter_gtc.services.metrics import as_table

WHEN = 1_764_866_700.25  # 2025-12-04 16:45:00.25 UTC


def test_wall_time_is_a_utc_timestamp_and_one_run_gives_no_run_column():
    import pandas

    table = as_table([Scalar("loss", 1, WHEN, 0.5), Scalar("loss", 2, WHEN + 1, 0.4)])
    assert list(table.columns) == ["tag", "step", "wall_time", "value"]
    assert pandas.api.types.is_datetime64_any_dtype(table["wall_time"])
    assert table["wall_time"].iloc[0] == pandas.Timestamp("2025-12-04 16:45:00.25", tz="UTC")


def test_runs_are_a_column_where_there_are_several():
    table = as_table([Scalar("loss", 1, WHEN, 0.5), Scalar("loss", 1, WHEN, 0.7, "validation")])
    assert list(table.columns) == ["tag", "step", "wall_time", "value", "run"]
    assert list(table["run"]) == ["", "validation"]


def test_an_empty_table_has_the_columns_too():
    assert list(as_table([]).columns) == ["tag", "step", "wall_time", "value"]


def test_without_pandas_rows_carry_a_datetime(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    [row] = as_table([Scalar("loss", 3, WHEN, 0.5)])
    assert row.wall_time == datetime(2025, 12, 4, 16, 45, 0, 250000, tzinfo=timezone.utc)
    assert (row.tag, row.step, row.value, row.run) == ("loss", 3, 0.5, "")
