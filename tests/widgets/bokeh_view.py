"""A stand-in for the browser's end of a Bokeh widget (jupyter_bokeh's ``BokehView`` running
BokehJS), for tests that have no browser: what a view shows, and what it says back.

It renders the widget's ``render_bundle`` into a document of its own, tells the kernel
``document_ready``, applies each patch the widget sends (reassembled from its comm messages:
header, metadata, content, then a header and bytes per buffer), and sends back every
change the patch made to its document, as BokehJS does: jupyter_bokeh's view holds the
changes made while it applies a patch and sends them once it is done. Those messages reach
the kernel later, on its main thread, so they wait in ``inbox`` until ``deliver()`` (the
test thread, playing the idle kernel) hands them to the widget. tests/browser/ runs the
real view.
"""

from __future__ import annotations

import json
import queue

from bokeh.core.serialization import Serializer
from bokeh.document import Document
from bokeh.models import ColumnDataSource
from bokeh.protocol import Protocol

DOCUMENT_READY = {"kind": "MessageSent", "msg_type": "bokeh_event",
                  "msg_data": {"type": "event", "name": "document_ready", "values": {"type": "map"}}}


class BokehView:
    """``BokehView(widget)`` renders the widget's current state, as a page that loads it does."""

    def __init__(self, widget):
        self.widget = widget
        self.inbox: queue.Queue = queue.Queue()  # messages for the kernel, oldest first
        self.doc: Document | None = None
        self.errors: list[Exception] = []  # what the kernel logged handling the view's messages
        self._fragments: list = []
        send = widget.comm.send

        def receive(data=None, metadata=None, buffers=None):
            self._receive(data, buffers)
            return send(data=data, metadata=metadata, buffers=buffers)

        widget.comm.send = receive
        self._render(widget.get_state()["render_bundle"])

    def sources(self) -> dict[str, dict[str, list]]:
        """The data of each named ColumnDataSource the view holds, as lists of floats."""
        return {m.name: {k: [float(x) for x in v] for k, v in m.data.items()} for m in self.doc.models
                if isinstance(m, ColumnDataSource) and m.name}

    def deliver(self, message: dict) -> None:
        """Hand one message from the view to the kernel, as its comm handler does: an error is
        logged there (here: kept in ``errors``), not raised."""
        try:
            self.widget._sync_model(self.widget, {**message, "event": "jsevent"}, [])
        except Exception as e:  # noqa: BLE001 - what ipykernel does with a comm handler's error
            self.errors.append(e)

    # -- the wire --------------------------------------------------------------------------

    def _receive(self, data: dict, buffers) -> None:
        if data.get("method") == "update" and "render_bundle" in data.get("state", {}):
            self._render(data["state"]["render_bundle"])
        elif data.get("method") == "custom" and data["content"].get("msg") == "patch":
            payload = data["content"].get("payload")
            self._fragments.append(payload if payload is not None else bytes(buffers[0]))
            self._apply_if_whole()

    def _render(self, bundle: str) -> None:
        self.doc = Document.from_json(next(iter(json.loads(bundle)["docs_json"].values())))
        self.doc.on_change(self._echo)
        self.inbox.put(DOCUMENT_READY)

    def _apply_if_whole(self) -> None:
        if len(self._fragments) < 3:
            return
        header, metadata, content, *buffers = self._fragments
        if len(buffers) < 2 * json.loads(header).get("num_buffers", 0):
            return
        self._fragments = []
        message = Protocol().assemble(header, metadata, content)
        for ref, payload in zip(buffers[::2], buffers[1::2]):
            message.assemble_buffer(json.loads(ref), payload)
        message.apply_to_document(self.doc, self)

    def _echo(self, event) -> None:
        if hasattr(event, "to_serializable"):
            serializer = Serializer(references=set(self.doc.models), deferred=False)
            self.inbox.put(serializer.encode(event))
