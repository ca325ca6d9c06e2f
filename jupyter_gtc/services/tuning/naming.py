"""What a study's name tells a user who reuses one: a study that still runs can be resumed,
a finished one cannot, and then the next free name is the one to give.

The store's own refusal ("exists already; resume it") sent a user who ran a study's cell again
after it had SUCCEEDED to `resume`, which does nothing for a finished study.
"""

from __future__ import annotations

import time

from ...exceptions import StudyExists
from ...state.store import StudyRecord
from .trials import FINISHED_STUDY_STATES


def next_free(base: str, taken: set[str], limit: int = 63) -> str:
    """``base``, or ``base-2``, ``base-3``, ... : the first not in ``taken``, at most ``limit`` long."""
    suffixes = ("", *(f"-{i}" for i in range(2, 10_000)))
    return next(n for n in (base[:limit - len(x)] + x for x in suffixes) if n not in taken)


def name_taken(record: StudyRecord, taken: set[str]) -> StudyExists:
    """The error for a new study named as ``record`` is: finished (when, and what to name the new
    one) or not (resume it, or name the new one)."""
    name, free = record.name, next_free(record.name, taken)
    new = f"--name {free} (name={free!r} from Python)"
    if record.state in FINISHED_STUDY_STATES:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.updated_at))
        reason = f" ({record.reason})" if record.reason else ""
        return StudyExists(f"study {name!r} is finished: {record.state} at {when}{reason}. A finished study cannot "
                           f"be resumed; give the new one another name, e.g. {new}")
    return StudyExists(f"a study named {name!r} exists and is {record.state}: resume it (gtc study resume {name}, "
                       f"api.resume_study({name!r})), or give the new one another name, e.g. {new}")
