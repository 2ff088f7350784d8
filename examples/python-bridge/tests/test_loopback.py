"""The bridge end to end on loopback: a stub relay (tests/stubs.py) plays the checker's part,
ThreadingHTTPServer the local handler. What `plimsoll check --bridge-command` judges, in small."""

import base64
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

import stubs

from plimsoll_bridge.bridge import Bridge, Upstream

logging.getLogger("plimsoll_bridge").addHandler(logging.NullHandler())  # quiet unless asked

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env(rid, path, **over):
    e = {"type": "relay-http-request", "request_id": rid, "method": "GET", "path": path}
    e.update(over)
    return e


def collect(peer, ids, timeout=10.0):
    """Frames by id until each id's final one; (frames, completion order, completion times)."""
    frames, order, done, deadline = {i: [] for i in ids}, [], {}, time.monotonic() + timeout
    while len(order) < len(ids):
        got = peer.next(timeout=max(0.01, deadline - time.monotonic()))
        assert got is not None, f"socket closed; missing {set(ids) - set(order)}"
        at, frame = got
        rid = frame["request_id"]
        assert rid in frames and rid not in done, f"unexpected frame {frame}"
        assert frame["seq"] == len(frames[rid]), f"seq gap for {rid}: {frame['seq']}"
        frames[rid].append(frame)
        if frame["final"]:
            order.append(rid)
            done[rid] = at
    return frames, order, done


def body(frames):
    joined = "".join(f["body_chunk"] for f in frames)
    if frames[0].get("headers", {}).get("content-transfer-encoding") == "base64":
        return base64.b64decode(joined, validate=True)
    return joined.encode()


class LoopbackTest(unittest.TestCase):
    def start(self, n=2, upstream_url=None):
        self.up, self.relay = stubs.Upstream(), stubs.Relay()
        self.bridge = Bridge(self.relay.url, Upstream(upstream_url or self.up.url), n)
        threading.Thread(target=self.bridge.run, daemon=True).start()
        self.addCleanup(self.relay.close)
        self.addCleanup(self.up.close)
        self.addCleanup(self.bridge.stop)
        return self.relay.peers.get(timeout=5)

    def test_overflow_queues_in_fifo_order_at_most_n_at_once(self):
        peer = self.start(n=2)
        ids = [f"r{i}" for i in range(6)]
        for i, rid in enumerate(ids):
            peer.send(env(rid, f"/hold?ms=200&tag={i}"))
        frames, order, _ = collect(peer, ids)
        self.assertEqual(self.up.max_active, 2)  # reached N, never more
        starts = [int(t) for t in self.up.started]
        self.assertEqual([sorted(starts[w:w + 2]) for w in (0, 2, 4)], [[0, 1], [2, 3], [4, 5]])
        self.assertEqual([sorted(order[w:w + 2]) for w in (0, 2, 4)],
                         [ids[0:2], ids[2:4], ids[4:6]])
        self.assertTrue(all(f[0]["status"] == 200 and body(f) == b"held" for f in frames.values()))

    def test_a_fast_request_overtakes_a_held_one(self):
        peer = self.start(n=2)
        peer.send(env("slow", "/hold?ms=500"))
        peer.send(env("fast", "/nothing-here"))
        frames, order, _ = collect(peer, ["slow", "fast"])
        self.assertEqual(order, ["fast", "slow"])
        self.assertEqual((frames["fast"][0]["status"], body(frames["fast"])), (404, b"no such thing"))

    def test_a_chunked_body_is_framed_piece_by_piece_and_ends_with_an_empty_final_frame(self):
        peer = self.start()
        peer.send(env("s", "/stream?n=3&gap_ms=100&tag=s"))
        frames, _, _ = collect(peer, ["s"])
        self.assertEqual(body(frames["s"]), b"0" * 10000 + b"1" * 10000 + b"2" * 10000)
        self.assertGreaterEqual(len(frames["s"]), 4)  # 3 pieces and the final frame
        self.assertEqual(frames["s"][-1]["body_chunk"], "")
        self.assertEqual(["headers" in f for f in frames["s"]], [True] + [False] * (len(frames["s"]) - 1))

    def test_the_first_frame_arrives_while_the_body_is_still_coming(self):
        peer = self.start()
        for i, length in enumerate(("", "&known=1")):
            tag = f"s{i}"
            peer.send(env(tag, f"/stream?n=2&gap_ms=500&tag={tag}{length}"))
            at, first = peer.next()
            self.assertEqual((first["seq"], first["final"]), (0, False))
            frames = [first]
            while not frames[-1]["final"]:
                frames.append(peer.next()[1])
            # The handler notes its end after its last write, which the bridge may relay first.
            deadline = time.monotonic() + 2
            while tag not in self.up.stream_done and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertLess(at, self.up.stream_done[tag] - 0.3)
            # With a Content-Length the last piece's frame is the final one; without, an empty one.
            self.assertEqual(frames[-1]["body_chunk"] == "", not length)

    def test_bodies_and_statuses_are_relayed_as_they_are(self):
        peer = self.start(n=4)
        peer.send(env("bin", "/bytes"))
        peer.send(env("txt", "/text"))
        peer.send(env("302", "/status?code=302"))
        peer.send(env("500", "/status?code=500"))
        peer.send(env("post", "/echo", method="POST", body="AP8=",
                      headers={"content-transfer-encoding": "base64", "X-Plimsoll-Hook": "hold=relay:1"}))
        frames, _, _ = collect(peer, ["bin", "txt", "302", "500", "post"])
        self.assertEqual(body(frames["bin"]), bytes(range(256)) * 160)
        self.assertEqual(body(frames["txt"]), ("é€😀 " * 6000).encode())
        for f in frames["bin"] + frames["txt"]:
            self.assertLessEqual(len(f["body_chunk"].encode()), 16384)
        redirect = frames["302"][0]
        self.assertEqual((redirect["status"], redirect["headers"]["location"]), (302, "/elsewhere"))
        self.assertEqual((frames["500"][0]["status"], body(frames["500"])), (500, b"status body"))
        seen = json.loads(body(frames["post"]))
        self.assertEqual(base64.b64decode(seen["body"]), b"\x00\xff")
        self.assertEqual((seen["content_type"], seen["user_agent"], seen["hook"]),
                         (None, None, "hold=relay:1"))  # headers go as they are, no more

    def test_an_unreachable_handler_is_502(self):
        closed = socket.create_server(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        peer = self.start(upstream_url=f"http://127.0.0.1:{port}")
        peer.send(env("x", "/v1/anything"))
        frames, _, _ = collect(peer, ["x"])
        self.assertEqual(frames["x"][0]["status"], 502)
        self.assertIn(b"did not answer", body(frames["x"]))

    def test_a_malformed_message_gets_one_relay_error_and_the_socket_goes_on(self):
        peer = self.start()
        peer.send("{oops")
        peer.send("binary", opcode=0x2)
        peer.send({"type": "relay-http-request", "request_id": "bad", "method": "GET", "path": "x"})
        peer.send(env("ok", "/hold?ms=1"))
        # The errors go out on their own thread, not queued behind requests: "ok"'s answer may
        # come before the last of them, so they are told apart by type, not by order.
        errors, answer, deadline = [], [], time.monotonic() + 10
        while len(errors) < 3 or not (answer and answer[-1]["final"]):
            got = peer.next(timeout=max(0.01, deadline - time.monotonic()))
            self.assertIsNotNone(got, f"socket closed after {errors} and {answer}")
            frame = got[1]
            (errors if frame["type"] == "relay-error" else answer).append(frame)
        self.assertEqual(sorted(e["request_id"] for e in errors), ["", "", "bad"])
        for e in errors:
            self.assertEqual((e["type"], e["code"], e["status"], e["seq"], e["final"]),
                             ("relay-error", "invalid_parameter", 400, 0, True))
        self.assertEqual([f["request_id"] for f in answer], ["ok"] * len(answer))
        self.assertEqual(answer[0]["status"], 200)

    def test_a_dropped_socket_is_redialled_and_its_orphans_never_reach_the_next(self):
        peer = self.start(n=2)
        for i in range(4):  # two run, two wait in the queue
            peer.send(env(f"orphan{i}", f"/hold?ms=600&tag=orphan{i}"))
        while self.up.active < 2:
            time.sleep(0.01)
        dropped_at = time.monotonic()
        peer.drop()
        fresh = self.relay.peers.get(timeout=2)
        self.assertLess(fresh.accepted_at - dropped_at, 1.0)
        for i in range(2):
            fresh.send(env(f"new{i}", f"/hold?ms=300&tag=new{i}"))
        frames, _, _ = collect(fresh, ["new0", "new1"])  # asserts no orphan's frame came
        self.assertEqual(sorted(self.up.started), ["new0", "new1", "orphan0", "orphan1"])
        time.sleep(0.2)
        self.assertTrue(fresh.frames.empty())
        # The orphans finished and gave their workers back: N at once again.
        self.up.max_active = 0
        for i in range(2):
            fresh.send(env(f"again{i}", "/hold?ms=200"))
        collect(fresh, ["again0", "again1"])
        self.assertEqual(self.up.max_active, 2)


class ProcessTest(unittest.TestCase):
    def test_sigterm_exits_0_within_a_second_with_workers_in_flight(self):
        up, relay = stubs.Upstream(), stubs.Relay()
        self.addCleanup(relay.close)
        self.addCleanup(up.close)
        proc = subprocess.Popen(
            [sys.executable, "-m", "plimsoll_bridge", "--relay-url", relay.url, "--upstream", up.url,
             "--relay-concurrency", "2"], cwd=HERE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        peer = relay.peers.get(timeout=5)
        for i in range(3):
            peer.send(env(f"h{i}", "/hold?ms=5000"))
        while up.active < 2:
            time.sleep(0.01)
        sent_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=5)
        self.assertLess(time.monotonic() - sent_at, 1.0)
        self.assertEqual(code, 0)
        with proc.stderr:
            lines = [json.loads(line) for line in proc.stderr.read().splitlines()]
        self.assertEqual([e["msg"] for e in lines][:2], ["bridge started", "relay connected"])
        self.assertEqual(lines[-1]["msg"], "stopped")


if __name__ == "__main__":
    unittest.main()
