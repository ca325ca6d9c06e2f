"""The callbacks one source hands each new value to: a poller's tick, a job's new scalars,
a cluster operation's step, a study's snapshot."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class Listeners(Generic[T]):
    def __init__(self, what: str):
        self._what = what  # for the log line when one fails
        self._lock = threading.Lock()
        self._items: list[Callable[[T], None]] = []

    def add(self, listener: Callable[[T], None]) -> Callable[[], None]:
        """Subscribe ``listener``; returns the function that unsubscribes it (idempotent)."""
        with self._lock:
            self._items.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._items:
                    self._items.remove(listener)

        return remove

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._items)

    def notify(self, value: T) -> None:
        """Call every listener with ``value``, outside the lock so a listener may unsubscribe.
        A failing listener is logged: a broken widget must not stop the source's thread."""
        with self._lock:
            items = list(self._items)
        for listener in items:
            try:
                listener(value)
            except Exception:
                log.exception("%s listener failed", self._what)
