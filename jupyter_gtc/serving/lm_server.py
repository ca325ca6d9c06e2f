"""Our default serving container for causal LMs: ``python -m jupyter_gtc.serving.lm_server``,
run by a replica's Slurm job under Vertex's serving contract (``contract.py``).

It loads ``AIP_STORAGE_URI`` (a folder ``from_pretrained`` reads: the model and its tokenizer)
with transformers, on the GPU where there is one, in a thread; the health route answers 200
only once the model is loaded (503 before), so the front sends it nothing early. Predictions:
``{"instances": [{"prompt": "...", "max_tokens": N}]}`` -> ``{"predictions": [{"text", "tokens"}]}``,
greedy. Concurrent requests are batched: one loop takes every instance waiting (up to
``MAX_BATCH``) into one ``generate`` call, left-padded, so requests that arrive while a batch
runs share the next one.

Who may call: the token in ``GTC_SERVING_TOKEN_FILE`` shown as ``Authorization: Bearer``
(checked before the body is read), on the address ``GTC_SERVING_HOST`` (loopback on a local
cluster). A body over 1.5 MB is 413; a bad one 400 with the field and the reason.
"""

from __future__ import annotations

import hmac
import json
import os
import queue
import socket
import sys
import threading
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .contract import MAX_REQUEST_BYTES, BadRequest, Instance, error_body, parse_lm_instances

MAX_BATCH = 32  # instances in one generate call
MAX_CONNECTIONS = 64  # served at once; the front holds each replica to far fewer
REQUEST_TIMEOUT = 30.0  # s a connection may stall within a request


class Engine:
    """The model, loaded in a thread, and the loop that batches generation."""

    def __init__(self, folder: str):
        self.folder = folder
        self.ready = threading.Event()
        self.failed: str | None = None
        self._queue: queue.Queue[tuple[list[Instance], Future]] = queue.Queue()

    def start(self) -> None:
        threading.Thread(target=self._run, name="engine", daemon=True).start()

    def submit(self, instances: list[Instance]) -> Future:
        future: Future = Future()
        self._queue.put((instances, future))
        return future

    def _run(self) -> None:
        try:
            self._load()
        except Exception as e:  # the health route says why, and the job's log has it
            self.failed = f"{type(e).__name__}: {e}"
            print(f"lm_server: the model in {self.folder} did not load: {self.failed}", file=sys.stderr, flush=True)
            return
        self.ready.set()
        print(f"lm_server: {self.folder} loaded on {self.device}", flush=True)
        while True:
            waiting = [self._queue.get()]
            count = len(waiting[0][0])
            while count < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                waiting.append(item)
                count += len(item[0])
            try:
                texts = self.generate([i for instances, _ in waiting for i in instances])
            except Exception as e:
                for _, future in waiting:
                    future.set_exception(e)
                continue
            for instances, future in waiting:
                future.set_result(texts[: len(instances)])
                texts = texts[len(instances):]

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        self.tokenizer.padding_side = "left"  # generation continues each row's own last token
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(self.folder, dtype=dtype).to(self.device).eval()

    def generate(self, instances: list[Instance]) -> list[dict]:
        tok = self.tokenizer
        batch = tok([i.prompt for i in instances], return_tensors="pt", padding=True).to(self.device)
        longest = max(i.max_tokens for i in instances)
        with self.torch.inference_mode():
            out = self.model.generate(**batch, max_new_tokens=longest, do_sample=False,
                                      pad_token_id=tok.pad_token_id)
        start = batch["input_ids"].shape[1]
        found = []
        for row, instance in zip(out, instances):
            new = row[start:start + instance.max_tokens]
            found.append({"text": tok.decode(new, skip_special_tokens=True), "tokens": int(new.shape[0])})
        return found


class Handler(BaseHTTPRequestHandler):
    server: "Server"
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; with Nagle's algorithm the body would wait for
        # the client's delayed ACK of the headers (40 ms on Linux), longer than a tiny model's answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args) -> None:  # one line per request is noise in the job's log
        pass

    def answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if code >= 400:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def allowed(self) -> bool:
        scheme, _, given = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.server.token.encode()):
            return True
        self.answer(401, error_body(401, "this replica answers its endpoint's front only"))
        return False

    def do_GET(self) -> None:
        if not self.allowed():
            return
        if self.path != self.server.health_route:
            self.answer(404, error_body(404, f"no route {self.path}"))
        elif self.server.engine.ready.is_set():
            self.answer(200, b'{"status": "ready"}')
        else:
            why = self.server.engine.failed or "the model is loading"
            self.answer(503, error_body(503, why))

    def do_POST(self) -> None:
        if not self.allowed():
            return
        if self.path != self.server.predict_route:
            self.answer(404, error_body(404, f"no route {self.path}"))
            return
        text = self.headers.get("Content-Length") or ""
        if not text.isdigit():
            self.answer(411 if not text else 400, error_body(400, "Content-Length: give the body's size in bytes"))
            return
        if int(text) > MAX_REQUEST_BYTES:
            self.answer(413, error_body(413, f"a request of {text} bytes is over {MAX_REQUEST_BYTES} bytes"))
            return
        body = self.rfile.read(int(text))
        try:
            instances = parse_lm_instances(body)
        except BadRequest as e:
            self.answer(400, error_body(400, str(e)))
            return
        if not self.server.engine.ready.is_set():
            self.answer(503, error_body(503, self.server.engine.failed or "the model is loading"))
            return
        try:
            predictions = self.server.engine.submit(instances).result()
        except Exception as e:
            self.answer(500, error_body(500, f"generation failed: {type(e).__name__}: {e}"))
            return
        self.answer(200, json.dumps({"predictions": predictions,
                                     "deployedModelId": self.server.deployed_model_id}).encode())


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address, engine: Engine, token: str, health_route: str, predict_route: str,
                 deployed_model_id: str):
        self.engine, self.token = engine, token
        self.health_route, self.predict_route, self.deployed_model_id = health_route, predict_route, deployed_model_id
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, Handler)

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # the front counts this replica down and retries later
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def read_token(path: str) -> str:
    with open(path) as f:
        token = f.read().strip()
    if not token:
        raise SystemExit(f"lm_server: the token file {path} is empty")
    return token


def main() -> None:
    env = os.environ
    try:
        port, folder = int(env["AIP_HTTP_PORT"]), env["AIP_STORAGE_URI"]
        token = read_token(env["GTC_SERVING_TOKEN_FILE"])
    except KeyError as e:
        raise SystemExit(f"lm_server: {e.args[0]} is not set; it runs as a replica of an endpoint "
                         f"(gtc model deploy), which sets Vertex's AIP_* variables") from None
    if folder.startswith("gs://"):
        raise SystemExit(f"lm_server: AIP_STORAGE_URI {folder}: a gs:// model is served on Vertex; here give a folder")
    engine = Engine(folder)
    engine.start()
    server = Server((env.get("GTC_SERVING_HOST", "127.0.0.1"), port), engine, token, env["AIP_HEALTH_ROUTE"],
                    env["AIP_PREDICT_ROUTE"], env.get("AIP_DEPLOYED_MODEL_ID", ""))
    print(f"lm_server: listening on {server.server_address[0]}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
