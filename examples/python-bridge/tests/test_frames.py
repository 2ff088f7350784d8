"""Unit tests of the protocol pieces (no network), and of a job against a fake socket.

    cd examples/python-bridge && python3 -m unittest discover -s tests
"""

import base64
import email.message
import json
import logging
import pathlib
import threading
import tomllib
import unittest

from plimsoll_bridge import bridge, frames
from plimsoll_bridge.frames import BodyEncoder, Malformed, NotUtf8, parse_envelope

logging.getLogger("plimsoll_bridge").addHandler(logging.NullHandler())  # quiet unless asked
CONTRACT = pathlib.Path(__file__).resolve().parents[3] / "spec" / "contract.toml"


def envelope(**over):
    env = {"type": "relay-http-request", "request_id": "r1", "method": "GET", "path": "/v1/x"}
    env.update(over)
    return json.dumps(env)


def encode(body: bytes, content_type: str, pieces: list[int], max_bytes: int):
    """Feeds `body` cut at `pieces` (sizes), then the end, as the bridge's read loop does."""
    enc, chunks, at = BodyEncoder(content_type, max_bytes), [], 0
    for size in pieces:
        chunks += enc.feed(body[at:at + size], final=False)
        at += size
    chunks += enc.feed(body[at:], final=True)
    return enc, chunks


class ContractValuesTest(unittest.TestCase):
    def test_constants_are_the_contracts(self):
        doc = tomllib.loads(CONTRACT.read_text())
        clauses = doc["clauses"]
        self.assertEqual(frames.MAX_FRAME_BODY_BYTES, clauses["R5"]["value"]["max_frame_body_bytes"])
        relay = doc["pools"]["relay"]
        self.assertEqual(bridge.DEFAULT_RELAY_CONCURRENCY, relay["workers"])
        r6 = clauses["R6"]["value"]
        self.assertEqual((bridge.RECONNECT_WITHIN_MS, bridge.BACKOFF_INITIAL_MS, bridge.BACKOFF_MAX_MS),
                         (r6["reconnect_within_ms"], r6["backoff_initial_ms"], r6["backoff_max_ms"]))
        self.assertEqual(bridge.STOP_WITHIN_MS, r6.get("stop_within_ms", bridge.STOP_WITHIN_MS))
        statuses = {e["code"]: e["status"] for e in doc["errors"]}
        for code, status in (frames.INVALID_PARAMETER, frames.STAGE_FAILED):
            self.assertEqual(statuses[code], status)
        envs = [o["env"] for o in relay["overrides"] if o["field"] == "workers"]
        self.assertEqual(set(envs), set(bridge.CONCURRENCY_ENV))

    def test_concurrency_flag_beats_seed_name_beats_generic_name(self):
        both = {"RELAY_CONCURRENCY": "3", "MESHNET_RELAY_CONCURRENCY": "5"}
        self.assertEqual(bridge.relay_concurrency(2, both), 2)
        self.assertEqual(bridge.relay_concurrency(None, both), 5)
        self.assertEqual(bridge.relay_concurrency(None, {"RELAY_CONCURRENCY": "3"}), 3)
        self.assertEqual(bridge.relay_concurrency(None, {}), 8)
        for bad in ("0", "two", "-1"):
            with self.assertRaises(ValueError):
                bridge.relay_concurrency(None, {"RELAY_CONCURRENCY": bad})


class EnvelopeTest(unittest.TestCase):
    def test_parses_and_drops_what_is_not_forwarded(self):
        env = parse_envelope(envelope(method="POST", body="{}", headers={
            "Content-Type": "application/json", "Content-Length": "999", "Host": "x",
            "X-Plimsoll-Hook": "hold=relay:5"}))
        self.assertEqual((env.request_id, env.method, env.path, env.body), ("r1", "POST", "/v1/x", b"{}"))
        self.assertEqual(env.headers, {"Content-Type": "application/json", "X-Plimsoll-Hook": "hold=relay:5"})

    def test_base64_bodies_are_read_like_the_reference_reads_them(self):
        cte = {"content-transfer-encoding": "base64"}
        self.assertEqual(parse_envelope(envelope(headers=cte, body="AP8=")).body, b"\x00\xff")
        self.assertEqual(parse_envelope(envelope(headers=cte, body="Zm9vYg")).body, b"foob")
        self.assertEqual(parse_envelope(envelope(headers=cte, body="Zm9v\r\nYmFy")).body, b"foobar")
        self.assertNotIn("content-transfer-encoding", parse_envelope(envelope(headers=cte)).headers)
        for bad in ("Zm9v!", "Zg==Zg", "Z"):
            with self.assertRaises(Malformed):
                parse_envelope(envelope(headers=cte, body=bad))

    def test_names_what_is_wrong_and_keeps_the_id(self):
        self.assertEqual(self._bad("{oops").request_id, "")
        self.assertEqual(self._bad('"a string"').request_id, "")
        m = self._bad('{"type":"nope","request_id":"r7"}')
        self.assertEqual((m.request_id, "type" in m.detail), ("r7", True))
        for text, word in [
            ('{"type":"relay-http-request","request_id":"r","path":"/"}', "method"),
            (envelope(request_id=""), "request_id"),
            (envelope(request_id=7), "request_id"),
            (envelope(method="G T"), "method"),
            (envelope(path="http://x/"), "path"),
            (envelope(path="//x"), "path"),
            (envelope(path="/a b"), "path"),
            (envelope(headers={"a b": "c"}), "header"),
            (envelope(headers={"a": "line\nbreak"}), "header"),
            (envelope(headers={"content-transfer-encoding": "gzip"}), "content-transfer-encoding"),
            (envelope(body=5), "body"),
        ]:
            self.assertIn(word, self._bad(text).detail, text)

    def _bad(self, text: str) -> Malformed:
        with self.assertRaises(Malformed) as caught:
            parse_envelope(text)
        return caught.exception

    def test_error_frame_is_the_rules(self):
        f = frames.error_frame("r7", frames.INVALID_PARAMETER, "what is wrong")
        self.assertEqual(f, {"type": "relay-error", "request_id": "r7", "seq": 0, "status": 400,
                             "body_chunk": "what is wrong", "final": True, "code": "invalid_parameter"})


class FramesTest(unittest.TestCase):
    def test_headers_first_frame_only_and_gapless_seq(self):
        reply = frames.Reply("r", 200, {"content-type": "text/plain"})
        fs = [reply.frame("a", False), reply.frame("b", False), reply.frame("", True)]
        self.assertEqual([f["seq"] for f in fs], [0, 1, 2])
        self.assertEqual(["headers" in f for f in fs], [True, False, False])
        self.assertEqual([f["status"] for f in fs], [200] * 3)
        self.assertEqual([f["final"] for f in fs], [False, False, True])

    def test_response_headers_lowercased_and_joined(self):
        m = email.message.Message()
        m["Content-Type"] = "text/plain"
        m["Vary"] = "a"
        m["Vary"] = "b"
        m["Content-Length"] = "3"
        m["X-Name"] = "é".encode().decode("latin-1")  # http.client's reading of UTF-8 bytes
        self.assertEqual(frames.response_headers(m),
                         {"content-type": "text/plain", "vary": "a, b", "x-name": "é"})

    def test_a_whole_small_body_is_judged_as_the_reference_judges_it(self):
        self.assertEqual(BodyEncoder("", 16).feed(b"", final=True), [])  # the caller sends one ""
        enc = BodyEncoder("application/octet-stream", 16)
        self.assertEqual(enc.feed(b"ok\n", final=True), ["ok\n"])
        self.assertFalse(enc.base64)
        enc = BodyEncoder("text/plain", 16)
        self.assertEqual(enc.feed(b"\x00\xff", final=True), ["AP8="])
        self.assertTrue(enc.base64)

    def test_text_never_splits_a_character(self):
        body = ("é€😀" * 50).encode()  # 2-, 3- and 4-byte characters
        for cut in (1, 2, 3, 5, 7):
            enc, chunks = encode(body, "text/plain; charset=utf-8", [cut] * (len(body) // cut - 1), 9)
            self.assertFalse(enc.base64)
            self.assertTrue(all(len(c.encode()) <= 9 for c in chunks))
            self.assertEqual("".join(chunks).encode(), body)

    def test_room_keeps_each_read_within_one_frame(self):
        enc = BodyEncoder("text/plain", 9)
        self.assertEqual(enc.room(), 6)  # undecided: what fits as base64 too
        enc.feed("ab€".encode()[:3], final=False)  # "ab" and one byte of "€" wait
        self.assertEqual(enc.room(), 8)
        enc = BodyEncoder("image/png", 16)
        enc.feed(b"\x89PNG", final=False)  # 3 bytes encoded, 1 carried
        self.assertEqual(enc.room(), 11)

    def test_binary_is_base64_in_whole_quanta_that_join(self):
        body = bytes(range(256)) * 4
        for cut in (1, 2, 5, 64):
            enc, chunks = encode(body, "application/octet-stream", [cut] * (len(body) // cut - 1), 30)
            self.assertTrue(enc.base64)
            self.assertTrue(all(len(c) <= 28 and len(c) % 4 == 0 for c in chunks))
            self.assertTrue(all("=" not in c for c in chunks[:-1]))
            self.assertEqual(base64.b64decode("".join(chunks), validate=True), body)
            self.assertEqual(base64.b64decode(chunks[0]), body[:len(base64.b64decode(chunks[0]))])

    def test_text_type_but_binary_first_piece_goes_base64(self):
        enc, chunks = encode(b"\xff\xfe" + b"x" * 40, "text/plain", [2], 16)
        self.assertTrue(enc.base64)
        self.assertEqual(base64.b64decode("".join(chunks)), b"\xff\xfe" + b"x" * 40)

    def test_text_that_turns_binary_later_is_an_error_not_a_lossy_body(self):
        with self.assertRaises(NotUtf8):
            encode(b"hello" + b"\xff" + b"world", "text/plain", [5], 64)
        with self.assertRaises(NotUtf8):
            encode("x€".encode()[:-1], "text/plain", [1], 64)  # cut off mid-character


class FakeWebSocket:
    """Records what the bridge sends; fails every send once `broken`."""

    sock = None

    def __init__(self):
        self.sent, self.broken = [], False

    def send(self, text):
        if self.broken:
            raise OSError("broken pipe")
        self.sent.append(json.loads(text))

    def recv_data(self):
        raise OSError("dropped")  # the relay hangs up at once

    def send_close(self, status=1000, reason=b""):
        pass

    def settimeout(self, timeout):
        pass

    def shutdown(self):
        self.broken = True


class FakeResponse:
    """An http.client.HTTPResponse stand-in: a chunked (length unknown) body in given pieces."""

    def __init__(self, pieces, content_type="text/plain", on_read=None):
        self.status, self.length, self._pieces, self._on_read = 200, None, list(pieces), on_read
        self.headers = email.message.Message()
        self.headers["Content-Type"] = content_type

    def read1(self, n):
        if self._on_read:
            self._on_read(len(self._pieces))
        piece = self._pieces.pop(0) if self._pieces else b""
        assert len(piece) <= n, (len(piece), n)
        return piece

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeUpstream:
    base = "http://local"

    def __init__(self, response=None, error=None):
        self.response, self.error, self.calls = response, error, 0

    def open(self, env):
        self.calls += 1
        if self.error:
            raise self.error
        return self.response


class JobTest(unittest.TestCase):
    def job(self, upstream, ws=None, max_bytes=16):
        ws = ws or FakeWebSocket()
        b = bridge.Bridge("ws://relay", upstream, 1, max_frame_body_bytes=max_bytes)
        conn = bridge.Connection(ws, 1)
        b._job(conn, parse_envelope(envelope()))
        b.stop()
        return ws.sent, conn

    def test_streamed_frames_are_sent_as_read_and_end_with_a_final_one(self):
        sent_before_read = []
        ws = FakeWebSocket()
        response = FakeResponse([b"abc", b"def"], on_read=lambda left: sent_before_read.append(len(ws.sent)))
        sent, _ = self.job(FakeUpstream(response), ws)
        self.assertEqual(sent_before_read, [0, 1, 2])  # each piece went out before the next read
        self.assertEqual([(f["seq"], f["body_chunk"], f["final"]) for f in sent],
                         [(0, "abc", False), (1, "def", False), (2, "", True)])
        self.assertEqual(sent[0]["headers"], {"content-type": "text/plain"})

    def test_unreachable_upstream_is_502(self):
        sent, _ = self.job(FakeUpstream(error=ConnectionRefusedError("refused")))
        self.assertEqual({f["status"] for f in sent}, {502})
        self.assertEqual([f["final"] for f in sent], [False] * (len(sent) - 1) + [True])
        self.assertIn("did not answer", "".join(f["body_chunk"] for f in sent))

    def test_a_dead_socket_drops_the_frames_and_stops_reading(self):
        ws = FakeWebSocket()
        response = FakeResponse([b"abc", b"def", b"ghi"],
                                on_read=lambda left: setattr(ws, "broken", left == 2))
        sent, conn = self.job(FakeUpstream(response), ws)
        self.assertEqual(len(sent), 1)
        self.assertEqual(response._pieces, [b"ghi"])  # no read after the failed send
        self.assertEqual((conn.delivered, conn.dropped), (0, 1))

    def test_a_job_of_a_closed_socket_never_calls_the_upstream(self):
        upstream = FakeUpstream(FakeResponse([b"x"]))
        b = bridge.Bridge("ws://relay", upstream, 1)
        conn = bridge.Connection(FakeWebSocket(), 1)
        conn.close()
        b._job(conn, parse_envelope(envelope()))
        b.stop()
        self.assertEqual(upstream.calls, 0)


class RecordingStop(threading.Event):
    """The bridge's stop event, recording each wait it is asked for and returning at once: the
    backoff is judged by what the bridge asked to wait, not by a clock a loaded machine
    stretches."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return self.is_set()


class BackoffTest(unittest.TestCase):
    def test_redial_waits_double_while_unreachable_and_reset_after_a_connect(self):
        dials = 0

        def dial(url, timeout):
            nonlocal dials
            dials += 1
            if dials == 6:
                b.stop()
            if dials in (1, 2, 3, 4, 6):
                raise ConnectionRefusedError("refused")
            return FakeWebSocket()  # the 5th dial connects; the socket drops at once

        b = bridge.Bridge("ws://relay", FakeUpstream(), 1, dial=dial)
        b._stopping = RecordingStop()
        runner = threading.Thread(target=b.run)
        runner.start()
        runner.join(timeout=5)
        self.assertFalse(runner.is_alive())
        self.assertEqual(dials, 6)
        # Four failed dials, doubling; a connect resets it; the sixth dial's wait ends at once
        # (stopped).
        self.assertEqual(b._stopping.waits[:5], [0.1, 0.2, 0.4, 0.8, 0.1])


if __name__ == "__main__":
    unittest.main()
