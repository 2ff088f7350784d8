"""Test doubles on loopback, standard library only: the relay (a minimal WebSocket server: the
handshake, unfragmented frames) and the local HTTP handler (ThreadingHTTPServer)."""

from __future__ import annotations

import base64
import hashlib
import json
import queue
import socket
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455


class Peer:
    """The relay's end of one bridge socket: send envelopes, read frames (None once closed)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.frames = sock, queue.Queue()
        self.accepted_at = time.monotonic()
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        key = next(line.split(":", 1)[1].strip() for line in head.decode().split("\r\n")
                   if line.lower().startswith("sec-websocket-key:"))
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        sock.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n").encode())
        self._buf = head.split(b"\r\n\r\n", 1)[1]
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, message: dict | str, opcode: int = 0x1) -> None:
        data = (message if isinstance(message, str) else json.dumps(message)).encode()
        n = len(data)
        size = bytes([n]) if n < 126 else (b"\x7e" + struct.pack("!H", n) if n < 65536
                                           else b"\x7f" + struct.pack("!Q", n))
        self.sock.sendall(bytes([0x80 | opcode]) + size + data)

    def drop(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def next(self, timeout: float = 5.0) -> dict | None:
        return self.frames.get(timeout=timeout)

    def _exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            more = self.sock.recv(65536)
            if not more:
                raise ConnectionError("closed")
            self._buf += more
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _read(self) -> None:
        try:
            while True:
                b1, b2 = self._exact(2)
                n = b2 & 0x7F
                n = struct.unpack("!H", self._exact(2))[0] if n == 126 else (
                    struct.unpack("!Q", self._exact(8))[0] if n == 127 else n)
                mask = self._exact(4) if b2 & 0x80 else b"\0\0\0\0"
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self._exact(n)))
                if b1 & 0x0F == 0x8:
                    break
                if b1 & 0x0F == 0x1:
                    self.frames.put((time.monotonic(), json.loads(data)))
        except (OSError, ConnectionError):
            pass
        self.frames.put(None)


class Relay:
    """Listens on 127.0.0.1; each socket the bridge dials shows up in `peers`."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"ws://127.0.0.1:{self.listener.getsockname()[1]}/relay"
        self.peers: queue.Queue[Peer] = queue.Queue()
        self._all: list[Peer] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            peer = Peer(sock)
            self._all.append(peer)
            self.peers.put(peer)

    def close(self) -> None:
        self.listener.close()
        for peer in self._all:
            peer.drop()


class Upstream(ThreadingHTTPServer):
    """The local handler: /hold?ms=, /stream?n=&gap_ms=, /bytes, /text, /status?code=, /echo.
    Counts requests in flight and records start order by their `tag`."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.lock, self.active, self.max_active, self.started = threading.Lock(), 0, 0, []
        self.stream_done: dict[str, float] = {}
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Upstream

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        s = self.server
        with s.lock:
            s.active += 1
            s.max_active = max(s.max_active, s.active)
            s.started.append(q.get("tag", url.path))
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                with s.lock:
                    s.active -= 1

        try:
            if url.path == "/hold":
                time.sleep(int(q["ms"]) / 1000)
                # The hold is the work. Its answer's last byte lets the bridge start its next
                # request, which may reach this server before this thread runs again: counted
                # as still active after the answer, the two would overlap by a write.
                release()
                self._answer(200, b"held", "text/plain")
            elif url.path == "/stream":
                self._stream(int(q["n"]), int(q["gap_ms"]) / 1000, q.get("tag", ""), "known" in q)
            elif url.path == "/bytes":
                self._answer(200, bytes(range(256)) * 160, "application/octet-stream")
            elif url.path == "/text":
                self._answer(200, ("é€😀 " * 6000).encode(), "text/plain; charset=utf-8")
            elif url.path == "/status":
                self._answer(int(q["code"]), b"status body", "text/plain", {"Location": "/elsewhere"})
            else:
                self._answer(404, b"no such thing", "text/plain")
        finally:
            release()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        seen = {"body": base64.b64encode(body).decode(), "content_type": self.headers.get("Content-Type"),
                "user_agent": self.headers.get("User-Agent"), "hook": self.headers.get("X-Plimsoll-Hook")}
        self._answer(200, json.dumps(seen).encode(), "application/json")

    def _answer(self, code: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, n: int, gap: float, tag: str, known: bool) -> None:
        """n pieces of 10000 bytes, `gap` apart; chunked unless `known` (a Content-Length)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if known:
            self.send_header("Content-Length", str(n * 10000))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(n):
            if i:
                time.sleep(gap)
            piece = (str(i) * 10000).encode()
            self.wfile.write(piece if known else b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        if not known:
            self.wfile.write(b"0\r\n\r\n")
        self.server.stream_done[tag] = time.monotonic()
