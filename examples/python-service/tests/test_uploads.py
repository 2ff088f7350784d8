"""B5 Upload budget: the budget's arithmetic, the contract loader's floor, and the service served
the way it is served (`connections.BoundedServer`), from raw client sockets, with a budget of a
few KB (the contract's smallest, 1 MB, is far above the bodies a test wants to send).

    cd examples/python-service && python3 -m unittest discover -s tests
"""

import asyncio
import json
import math
import os
import shutil
import tempfile
import time
import unittest

from plimsoll_service import contract
from plimsoll_service.app import Service, make_app
from plimsoll_service.connections import BoundedServer
from plimsoll_service.problems import JsonLog
from plimsoll_service.uploads import UploadBudget

EXPORT = "/v1/export?format=svg"
DESIGN = json.dumps({
    "format": "plimsoll-design/1", "width_mm": 10.0, "height_mm": 10.0,
    "threads": [{"color": "#ff0000"}],
    "extents": {"min_x": 0, "min_y": 0, "max_x": 300, "max_y": 300},
    "stitch_count": 2,
    "stitches": [{"x": 0, "y": 0, "cmd": "jump"}, {"x": 0, "y": 0, "cmd": "stitch"},
                 {"x": 300, "y": 300, "cmd": "stitch"}, {"x": 300, "y": 300, "cmd": "end"}],
}).encode()


def head(path: str, length: int | None, hook: str | None = None) -> bytes:
    """A POST head: with a Content-Length, or chunked when `length` is None."""
    lines = [f"POST {path} HTTP/1.1", "Host: test", "Content-Type: application/json"]
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    if hook:
        lines.append(f"X-Plimsoll-Hook: {hook}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict, dict | bytes]:
    """One HTTP/1.1 response with a Content-Length: (status, headers, body: parsed when JSON)."""
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode().split("\r\n")
    headers = {k.lower(): v for k, _, v in (h.partition(": ") for h in lines[1:] if h)}
    body = await reader.readexactly(int(headers["content-length"]))
    if "json" in headers.get("content-type", ""):
        body = json.loads(body)
    return int(lines[0].split()[1]), headers, body


class UploadShareTest(unittest.TestCase):
    def test_reserve_grows_only_refuses_whole_and_releases_once(self):
        budget = UploadBudget(1000)
        a, b = budget.share(), budget.share()
        self.assertTrue(a.reserve(600))
        self.assertTrue(a.reserve(400))  # already covered: a share never shrinks while read
        self.assertEqual((a.bytes, budget.held), (600, 600))
        self.assertFalse(b.reserve(401))  # refused whole: nothing of it is charged
        self.assertEqual((b.bytes, budget.held), (0, 600))
        self.assertTrue(b.reserve(400))  # exactly the budget fits
        self.assertEqual(budget.held, 1000)
        a.release()
        a.release()  # a second release gives nothing back
        self.assertEqual(budget.held, 400)
        b.release()
        self.assertEqual(budget.held, 0)


class UploadBudgetContractTest(unittest.TestCase):
    # 2 + 1 digitize and 1 + 0 export places, each at its endpoint's max_upload_bytes, plus one
    # largest upload being read.
    ENV = {"WORKER_POOL_SIZE": "2", "QUEUE_CAPACITY": "1", "EXPORT_POOL_SIZE": "1", "EXPORT_QUEUE_CAPACITY": "0"}

    def floor_mb(self) -> int:
        api = contract.settings_from_env(self.ENV).api
        d, e = api["digitize"]["max_upload_bytes"], api["export"]["max_upload_bytes"]
        return math.ceil((3 * d + 1 * e + max(d, e)) / contract.MB)

    def test_value_and_override_come_from_the_contract(self):
        s = contract.settings_from_env({})
        self.assertEqual(s.upload_budget_mb, s.doc["upload"]["budget_mb"])
        s = contract.settings_from_env({**self.ENV, "UPLOAD_BUDGET_MB": str(self.floor_mb())})
        self.assertEqual(s.upload_budget_mb, self.floor_mb())
        self.assertEqual(s.doc["upload"]["budget_mb"], self.floor_mb())

    def test_a_budget_below_what_the_pools_hold_stops_the_start(self):
        needed = self.floor_mb()
        with self.assertRaises(contract.ContractError) as ctx:
            contract.settings_from_env({**self.ENV, "UPLOAD_BUDGET_MB": str(needed - 1)})
        self.assertIn("upload_budget_mb", str(ctx.exception))
        self.assertIn(f"{needed} MB", str(ctx.exception))
        # The default pools hold more: the same budget is too small for them.
        with self.assertRaises(contract.ContractError):
            contract.settings_from_env({"UPLOAD_BUDGET_MB": str(needed)})
        for bad in ("0", str((1 << 24) + 1), "-1", "lots"):
            with self.assertRaises(contract.ContractError, msg=bad):
                contract.settings_from_env({**self.ENV, "UPLOAD_BUDGET_MB": bad})


class UploadBudgetServiceTest(unittest.IsolatedAsyncioTestCase):
    LIMIT = 1000  # bytes: the budget the tests fill
    ENV = {
        "PLIMSOLL_TEST_HOOKS": "1", "EXPORT_POOL_SIZE": "1", "EXPORT_QUEUE_CAPACITY": "1",
        "EXPORT_TIMEOUT_MS": "1000", "UPLOAD_READ_TIMEOUT_MS": "400",
    }

    async def asyncSetUp(self):
        self.tmp = tempfile.mkdtemp(prefix="plimsoll-b5-")
        settings = contract.settings_from_env(self.ENV)
        self.svc = Service(settings, JsonLog(os.path.join(self.tmp, "log.jsonl"), False), self.tmp)
        self.svc.uploads.limit = self.LIMIT
        self.pool = self.svc.pools["export"]
        self.server = BoundedServer(
            make_app(self.svc), head_timeout_ms=5000, max_connections=64, shutdown_timeout=1,
            handler_cancellation=True, access_log=None,
        )
        self.port = await self.server.start("127.0.0.1", 0)
        self.writers = []

    async def asyncTearDown(self):
        for w in self.writers:
            w.close()
        await self.server.stop()
        for ex in self.svc.executors.values():
            ex.shutdown(wait=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    async def connect(self, data: bytes = b""):
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers.append(writer)
        writer.write(data)
        return reader, writer

    async def until(self, what: str, cond, within: float = 2.0) -> None:
        end = time.monotonic() + within
        while not cond():
            self.assertLess(time.monotonic(), end, f"never: {what}")
            await asyncio.sleep(0.01)

    async def assert_answer(self, reader, code: str) -> dict:
        """Reads one answer: the contract's status for `code`, and `code` in the body."""
        status, _, body = await read_response(reader)
        self.assertEqual((status, body["code"]), (self.svc.settings.errors[code]["status"], code))
        return body

    def assert_budget_refusal(self, status, headers, body):
        self.assertEqual((status, body["code"]), (self.svc.settings.errors["overloaded"]["status"], "overloaded"))
        self.assertIn("upload budget", body["detail"])
        self.assertEqual(headers["retry-after"], str(self.pool.retry_after()))
        self.assertEqual(headers["server-timing"], "queue;dur=0.0, run;dur=0.0")

    async def test_a_declared_length_past_the_budget_is_refused_before_its_body(self):
        _, stalled = await self.connect(head(EXPORT, 600) + b"{" * 10)  # a head and a prefix
        await self.until("the declared length is reserved at once", lambda: self.svc.uploads.held == 600)

        reader, _ = await self.connect(head(EXPORT, self.LIMIT - 600 + 1))  # no byte of the body
        self.assert_budget_refusal(*await asyncio.wait_for(read_response(reader), 1))
        self.assertEqual(self.pool.outcomes["overloaded"], 1)
        self.assertEqual(self.pool.outcomes["invalid"], 0)
        # No slot was asked for: T3's window is untouched.
        self.assertEqual((len(self.pool.estimator.samples), len(self.pool.estimator.pending_refusals)), (0, 0))
        self.assertEqual(self.svc.uploads.held, 600)

        # What still fits is served.
        self.assertLessEqual(600 + len(DESIGN), self.LIMIT)
        reader, _ = await self.connect(head(EXPORT, len(DESIGN)) + DESIGN)
        self.assertEqual((await read_response(reader))[0], 200)

        # Once the stalled upload is gone, the refused length is admitted.
        stalled.close()
        await self.until("the stalled upload's share is given back", lambda: self.svc.uploads.held == 0)
        reader, _ = await self.connect(head(EXPORT, self.LIMIT - 600 + 1) + b"x" * (self.LIMIT - 600 + 1))
        await self.assert_answer(reader, "malformed_design")  # anything but overloaded
        self.assertEqual(self.svc.uploads.held, 0)

    async def test_a_chunked_upload_is_cut_off_when_it_grows_past_the_budget(self):
        reader, writer = await self.connect(head(EXPORT, None))
        for i in range(3):
            writer.write(chunk(b" " * 300))
            await self.until(f"chunk {i + 1} is charged", lambda: self.svc.uploads.held == 300 * (i + 1))
        writer.write(chunk(b" " * 300))  # 1200 bytes: past the budget, and no last chunk follows
        self.assert_budget_refusal(*await asyncio.wait_for(read_response(reader), 1))
        self.assertEqual(self.svc.uploads.held, 0)
        self.assertEqual(self.pool.outcomes["overloaded"], 1)
        self.assertEqual(len(self.pool.estimator.pending_refusals), 0)

    async def test_the_share_is_held_through_queue_and_job_and_given_back_on_every_path(self):
        held = lambda: self.svc.uploads.held  # noqa: E731

        # Success.
        reader, _ = await self.connect(head(EXPORT, len(DESIGN), "hold=parse:200") + DESIGN)
        await self.until("the running job holds its body", lambda: self.pool.busy == 1)
        self.assertEqual(held(), len(DESIGN))
        self.assertEqual((await read_response(reader))[0], 200)
        self.assertEqual(held(), 0)

        # A job past its timeout and one waiting behind it: it times out in the queue, or just
        # after it got the freed slot (the two deadlines are a few ms apart), never served.
        running, _ = await self.connect(head(EXPORT, len(DESIGN), "hold=parse:5000") + DESIGN)
        await self.until("the first runs", lambda: self.pool.busy == 1)
        queued, _ = await self.connect(head(EXPORT, len(DESIGN), "hold=parse:5000") + DESIGN)
        await self.until("the second queues", lambda: self.pool.queue_depth == 1)
        self.assertEqual(held(), 2 * len(DESIGN))
        answers = await asyncio.gather(read_response(running), read_response(queued))
        timeout = self.svc.settings.errors["timeout"]["status"]
        self.assertEqual([(s, b["code"]) for s, _, b in answers], [(timeout, "timeout")] * 2)
        self.assertEqual(held(), 0)

        # A failing stage.
        reader, _ = await self.connect(head(EXPORT, len(DESIGN), "fail=parse") + DESIGN)
        await self.assert_answer(reader, "stage_failed")
        self.assertEqual(held(), 0)

        # The client goes away while its job runs.
        _, writer = await self.connect(head(EXPORT, len(DESIGN), "hold=parse:5000") + DESIGN)
        await self.until("the job runs", lambda: self.pool.busy == 1)
        writer.close()
        await self.until("the job is cancelled", lambda: self.pool.cancellations == 1 and self.pool.busy == 0)
        self.assertEqual(held(), 0)

        # The body does not arrive in time.
        reader, _ = await self.connect(head(EXPORT, 100) + b"{" * 10)
        await self.until("the declared length is reserved", lambda: held() == 100)
        await self.assert_answer(reader, "upload_timeout")
        self.assertEqual(held(), 0)

        # Empty bodies, declared and chunked.
        for data in (head(EXPORT, 0), head(EXPORT, None) + b"0\r\n\r\n"):
            reader, _ = await self.connect(data)
            await self.assert_answer(reader, "empty_body")
            self.assertEqual(held(), 0)

        # Past the endpoint's limit: declared (never reserved), and counted while read (after its
        # first chunk was charged). payload_too_large comes before the budget either way, once the
        # body has ended (rule `upload-read`: drained first); a declared one that never comes is
        # upload_timeout.
        self.svc.settings.api["export"]["max_upload_bytes"] = 500
        reader, _ = await self.connect(head(EXPORT, self.LIMIT + 1) + b" " * (self.LIMIT + 1))
        await self.assert_answer(reader, "payload_too_large")
        self.assertEqual(held(), 0)
        started = time.monotonic()
        reader, _ = await self.connect(head(EXPORT, self.LIMIT + 1))
        await self.assert_answer(reader, "upload_timeout")
        self.assertGreaterEqual(time.monotonic() - started, 0.4)
        self.assertEqual(held(), 0)
        reader, writer = await self.connect(head(EXPORT, None) + chunk(b" " * 300))
        await self.until("the first chunk is charged", lambda: held() == 300)
        writer.write(chunk(b" " * 300) + b"0\r\n\r\n")
        await self.assert_answer(reader, "payload_too_large")
        self.assertEqual(held(), 0)
        self.assertEqual(self.pool.outcomes["overloaded"], 0)


if __name__ == "__main__":
    unittest.main()
