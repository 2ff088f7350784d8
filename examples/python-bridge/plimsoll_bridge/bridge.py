"""The relay bridge of seed 003 (`RelayHttpBridge`), as a mesh node runs it.

It dials the relay, receives `relay-http-request` envelopes, performs each against the node's
local HTTP handler and answers with `relay-http-response` frames matched by `request_id`. The
seed's design, with its bug fixed: the seed ran one request at a time on the receive loop, so a
slow request stalled every other route's calls (R2). Here:

- The receive loop only parses and submits: envelopes go to one ThreadPoolExecutor of N workers
  (R1), whose queue is FIFO and unbounded, so beyond N they wait in arrival order and are never
  refused (R4). The executor lives as long as the bridge, across sockets, so orphans of a
  dropped socket and the next socket's work together never run more than N upstream requests.
- Each socket is a Connection with its own lock, held for one whole frame at a time (R5), and
  its own open flag: a job is bound to the Connection its envelope came on, so once that socket
  is gone the job's frames are dropped, never sent on the next socket (R6).
- A response streams: each piece of the upstream body is sent as a frame as soon as it is read;
  no more than one frame's body is held per response.
- When the socket drops, the bridge dials again after R6's backoff.
"""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, cast

import websocket  # websocket-client

from .frames import (
    INVALID_PARAMETER,
    MAX_FRAME_BODY_BYTES,
    STAGE_FAILED,
    TRANSFER_ENCODING,
    BodyEncoder,
    Envelope,
    Frame,
    Malformed,
    NotUtf8,
    Reply,
    error_frame,
    parse_envelope,
    response_headers,
)

log = logging.getLogger("plimsoll_bridge")

# spec/contract.toml, [pools.relay] workers, and its overrides: the flag wins over
# MESHNET_RELAY_CONCURRENCY (the seed's name), which wins over RELAY_CONCURRENCY.
DEFAULT_RELAY_CONCURRENCY = 8
CONCURRENCY_ENV = ("MESHNET_RELAY_CONCURRENCY", "RELAY_CONCURRENCY")
# spec/contract.toml, [clauses.R6] value: back within reconnect_within_ms of a drop, first retry
# after backoff_initial_ms, doubling up to backoff_max_ms while the relay is unreachable.
RECONNECT_WITHIN_MS = 1000
BACKOFF_INITIAL_MS = 100
BACKOFF_MAX_MS = 5000
# spec/contract.toml, [clauses.R6] value.stop_within_ms: told to stop, exit within this long.
STOP_WITHIN_MS = 1000
# A relay that accepts TCP but never finishes the handshake is one failed dial, not a hung
# bridge (the reference's bound: the larger of the two R6 times).
HANDSHAKE_TIMEOUT_S = max(BACKOFF_MAX_MS, RECONNECT_WITHIN_MS) / 1000
# The seed's `urlopen(..., timeout=300)`: per socket operation, connect and each read.
UPSTREAM_TIMEOUT_S = 300


def relay_concurrency(flag: int | None, environ: Mapping[str, str]) -> int:
    """N: `--relay-concurrency` if given, else the first of CONCURRENCY_ENV set, else 8. Raises
    ValueError for a value that is not a positive integer (a bad setting stops the start)."""
    for name, raw in (("--relay-concurrency", flag), *((e, environ.get(e)) for e in CONCURRENCY_ENV)):
        if raw is None or raw == "":
            continue
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{name}={raw!r} is not an integer") from None
        if value < 1:
            raise ValueError(f"{name}={raw!r} must be at least 1")
        return value
    return DEFAULT_RELAY_CONCURRENCY


class _AsIs(urllib.request.HTTPErrorProcessor):
    """Hands every answer back as it came: a 4xx/5xx is relayed with its own status and body,
    not raised as HTTPError, and a redirect is relayed, not followed (the redirect handler only
    runs when this processor asks for it)."""

    def http_response(self, request: urllib.request.Request, response: Any) -> Any:
        return response

    https_response = http_response


class _NoImpliedContentType(urllib.request.BaseHandler):
    """urllib adds `Content-Type: application/x-www-form-urlencoded` to any request with a body;
    the envelope's headers must go to the handler unchanged, so an implied one is taken back."""

    handler_order = 600  # after AbstractHTTPHandler.do_request_ (500) has added it

    def http_request(self, request: urllib.request.Request) -> urllib.request.Request:
        if "Content-type" not in request.headers:  # urllib stores names capitalize()d
            request.remove_header("Content-type")
        return request

    https_request = http_request


class Upstream:
    """The node's local HTTP handler at `base` (scheme, host, port, optional path prefix)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        # No proxy: the handler is local, whatever http_proxy says.
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), _AsIs(), _NoImpliedContentType())
        self._opener.addheaders = []  # no implied User-Agent either

    def open(self, env: Envelope) -> http.client.HTTPResponse:
        """Sends the request and returns the answer once its head has arrived; raises OSError
        (URLError, a timeout, a refused connection) or HTTPException when it cannot."""
        request = urllib.request.Request(self.base + env.path, data=env.body or None,
                                         headers=env.headers, method=env.method)
        return cast(http.client.HTTPResponse, self._opener.open(request, timeout=UPSTREAM_TIMEOUT_S))


class WebSocketLike(Protocol):
    """What the bridge needs of a websocket-client WebSocket (tests pass a fake)."""

    sock: socket.socket | None

    def recv_data(self) -> tuple[int, bytes]: ...
    def send(self, payload: str) -> Any: ...
    def send_close(self, status: int = ..., reason: bytes = ...) -> None: ...
    def settimeout(self, timeout: float | None) -> None: ...
    def shutdown(self) -> None: ...


class Connection:
    """One socket to the relay. `send` is the only way a frame goes out: one frame per lock hold,
    and nothing at all once the socket is closed, which is what makes a dead socket's late
    frames drop instead of reaching the next socket."""

    def __init__(self, ws: WebSocketLike, conn_id: int) -> None:
        self.ws, self.id = ws, conn_id
        self._lock = threading.Lock()  # held for one frame's send
        # Held only for non-blocking work: the socket's shutdown and close, and the counters.
        self._state = threading.Lock()
        self._open = True
        self._released = False
        self.delivered = self.dropped = 0  # responses sent whole / dropped

    @property
    def is_open(self) -> bool:
        return self._open

    def send(self, frame: Frame) -> bool:
        """Sends one whole frame; False when the socket is gone (the frame is dropped)."""
        text = json.dumps(frame, ensure_ascii=False)
        with self._lock:
            if not self._open:
                return False
            try:
                self.ws.send(text)
                return True
            except (websocket.WebSocketException, OSError) as exc:
                _log(logging.DEBUG, "send failed", connection=self.id, error=str(exc))
                self._open = False
                return False

    def close(self, going_away: bool = False) -> None:
        """Marks the socket closed and wakes whoever is blocked on it. Does not wait for the
        send lock (a worker may hold it, blocked on a full socket): shutting the TCP socket down
        is what frees it. On `going_away` (the bridge stops) the relay gets a close frame if the
        lock is free at once."""
        self._open = False
        if going_away and self._lock.acquire(timeout=0.1):
            try:
                self.ws.settimeout(0.2)
                self.ws.send_close(1001)
            except (websocket.WebSocketException, OSError):
                pass
            finally:
                self._lock.release()
        with self._state:
            sock = self.ws.sock  # websocket-client drops it itself when the relay hangs up
            if not self._released and sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def release(self) -> None:
        """Closes the socket for good, once no send of ours is in progress, so the descriptor is
        not closed under a sender (and handed to the next socket). Call after close(), which makes
        a blocked send fail at once."""
        with self._lock, self._state:
            self._released = True
            self.ws.shutdown()

    def count(self, delivered: bool) -> None:
        with self._state:
            if delivered:
                self.delivered += 1
            else:
                self.dropped += 1


Dial = Callable[[str, float], WebSocketLike]


def _dial(url: str, timeout: float) -> WebSocketLike:
    ws = cast(WebSocketLike, websocket.create_connection(url, timeout=timeout))
    ws.settimeout(None)  # after the handshake: block in recv until a message or the socket ends
    return ws


class Bridge:
    """Dials `relay_url` and serves each socket until `stop`; see the module's docstring."""

    def __init__(self, relay_url: str, upstream: Upstream, concurrency: int,
                 max_frame_body_bytes: int = MAX_FRAME_BODY_BYTES, dial: Dial = _dial) -> None:
        self.relay_url, self.upstream, self.concurrency = relay_url, upstream, concurrency
        self.max_frame_body_bytes = max_frame_body_bytes
        self._dial = dial
        self._workers = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="relay-worker")
        # relay-error frames are sent off the receive loop too, but not queued behind requests.
        self._errors = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-error")
        self._stopping = threading.Event()
        self._current: Connection | None = None
        self._ids = itertools.count(1)

    # -- the outer loop -------------------------------------------------------------------

    def run(self) -> None:
        """Dials, serves the socket until it ends, and dials again: the first retry
        BACKOFF_INITIAL_MS after a drop or a failed dial, doubling to BACKOFF_MAX_MS while the
        relay stays unreachable, back to the start after each successful connect."""
        wait_ms = BACKOFF_INITIAL_MS
        while not self._stopping.is_set():
            try:
                ws = self._dial(self.relay_url, HANDSHAKE_TIMEOUT_S)
            except (websocket.WebSocketException, OSError) as exc:
                _log(logging.WARNING, "relay unreachable", relay=self.relay_url, error=str(exc),
                     retry_in_ms=wait_ms)
            else:
                self._serve(Connection(ws, next(self._ids)))
                wait_ms = BACKOFF_INITIAL_MS
                if not self._stopping.is_set():
                    _log(logging.INFO, "relay reconnecting", relay=self.relay_url, retry_in_ms=wait_ms)
            if self._stopping.wait(wait_ms / 1000):
                break
            wait_ms = min(wait_ms * 2, BACKOFF_MAX_MS)

    def stop(self) -> None:
        """Stops without waiting for stragglers: no more dials, the socket closed (so running
        jobs' frames drop), queued jobs cancelled. Running jobs are left to the process's exit."""
        self._stopping.set()
        conn = self._current
        if conn is not None:
            conn.close(going_away=True)
        self._workers.shutdown(wait=False, cancel_futures=True)
        self._errors.shutdown(wait=False, cancel_futures=True)

    # -- one socket -----------------------------------------------------------------------

    def _serve(self, conn: Connection) -> None:
        """The receive loop: parse, submit, read the next message; it never waits for a request."""
        self._current = conn
        _log(logging.INFO, "relay connected", relay=self.relay_url, connection=conn.id)
        envelopes, reason = 0, "closed by the relay"
        try:
            while not self._stopping.is_set():
                try:
                    opcode, data = conn.ws.recv_data()
                except (websocket.WebSocketException, OSError) as exc:
                    reason = str(exc) or type(exc).__name__
                    break
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    break
                if opcode != websocket.ABNF.OPCODE_TEXT:
                    self._reject(conn, Malformed("", "binary messages are not envelopes: send JSON text"))
                    continue
                text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
                try:
                    env = parse_envelope(text)
                except Malformed as bad:
                    self._reject(conn, bad)
                    continue
                envelopes += 1
                try:
                    self._workers.submit(self._job, conn, env)
                except RuntimeError:  # the executor is shut down: the bridge is stopping
                    break
        finally:
            conn.close()
            conn.release()
            _log(logging.INFO, "relay disconnected", relay=self.relay_url, connection=conn.id,
                 reason="bridge stopping" if self._stopping.is_set() else reason,
                 envelopes=envelopes, delivered=conn.delivered, dropped=conn.dropped)

    def _reject(self, conn: Connection, bad: Malformed) -> None:
        _log(logging.WARNING, "malformed envelope", connection=conn.id,
             request_id=bad.request_id, error=bad.detail)
        try:
            self._errors.submit(conn.send, error_frame(bad.request_id, INVALID_PARAMETER, bad.detail))
        except RuntimeError:
            pass

    # -- one envelope ---------------------------------------------------------------------

    def _job(self, conn: Connection, env: Envelope) -> None:
        """A worker: performs the envelope and sends its frames on `conn`, the socket it came
        on. A job whose socket died while it waited leaves without calling the upstream."""
        if not conn.is_open:
            _log(logging.DEBUG, "envelope of a closed socket skipped", connection=conn.id,
                 request_id=env.request_id)
            return
        started = time.monotonic()
        try:
            try:
                response = self.upstream.open(env)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                status, delivered = self._bad_gateway(conn, env, exc)
            else:
                with response:
                    status, delivered = self._stream(conn, env, response)
        except Exception:  # a bug: log it, since a future's exception is otherwise never seen
            _log(logging.ERROR, "relay job failed", exc_info=True, request_id=env.request_id)
            return
        conn.count(delivered)
        _log(logging.INFO if delivered else logging.DEBUG,
             "relayed" if delivered else "response dropped: its socket is gone",
             connection=conn.id, request_id=env.request_id, method=env.method, path=env.path,
             status=status, duration_ms=round((time.monotonic() - started) * 1000, 1))

    def _bad_gateway(self, conn: Connection, env: Envelope, exc: BaseException) -> tuple[int, bool]:
        """The local handler did not answer: 502 with a short text body, as the reference does.
        Returns the status sent and whether all of it was sent."""
        body = f"the bridge's local handler {self.upstream.base}{env.path} did not answer: {exc}"
        reply = Reply(env.request_id, 502, {"content-type": "text/plain; charset=utf-8"})
        chunks = BodyEncoder("text/plain", self.max_frame_body_bytes).feed(body.encode(), final=True)
        return 502, all(conn.send(reply.frame(c, i == len(chunks) - 1)) for i, c in enumerate(chunks))

    def _stream(self, conn: Connection, env: Envelope,
                response: http.client.HTTPResponse) -> tuple[int, bool]:
        """Sends the answer frame by frame as its body arrives; returns the status sent and
        whether all of it was sent (False: the socket is gone, the rest dropped).

        `read1` returns as soon as some bytes are there (`read(n)` would wait for all n, and
        hold back a piece the handler has already written). With a Content-Length, the last
        piece is known as it is read and its frame is the final one; without (chunked, or until
        close), the end is only known when a read returns nothing, and the final frame carries
        what the encoder held back (often nothing: an empty chunk). A small body usually comes
        in one piece, which the encoder then judges exactly as the reference does.
        """
        headers = response_headers(response.headers)
        encoder = BodyEncoder(headers.get("content-type", ""), self.max_frame_body_bytes)
        request_id = env.request_id
        reply = Reply(request_id, response.status, headers)
        final = False
        while not final:
            try:
                piece = response.read1(encoder.room())
                final = not piece or response.length == 0
                if not piece and response.length:  # the handler hung up early
                    raise http.client.IncompleteRead(b"", response.length)
            except (OSError, http.client.HTTPException) as exc:
                if reply.seq == 0:
                    return self._bad_gateway(conn, env, exc)
                # Frames are out already: end this response with an error the receiver can see.
                detail = f"the local handler's body could not be read: {exc!r}"
                frame = error_frame(request_id, STAGE_FAILED, detail, seq=reply.seq)
                return reply.status, conn.send(frame)
            try:
                chunks = encoder.feed(piece, final) or ([""] if final else [])
            except NotUtf8 as exc:
                frame = error_frame(request_id, STAGE_FAILED, str(exc), seq=reply.seq)
                return reply.status, conn.send(frame)
            if encoder.base64 and reply.seq == 0:
                reply.headers[TRANSFER_ENCODING] = "base64"
            for i, chunk in enumerate(chunks):
                if not conn.send(reply.frame(chunk, final and i == len(chunks) - 1)):
                    # An orphan: stop reading; leaving `with response` frees the worker.
                    return reply.status, False
        return reply.status, True


def _log(level: int, msg: str, exc_info: bool = False, **fields: Any) -> None:
    """One log line; `fields` become keys of its JSON object (see __main__.JsonFormatter)."""
    log.log(level, msg, exc_info=exc_info, extra={"fields": fields})
