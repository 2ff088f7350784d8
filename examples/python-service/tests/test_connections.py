"""B4 Connection bounds, on a small application served the way the service is served
(`connections.BoundedServer`), from raw client sockets, with small values: a 300 ms head timeout
and a cap of 5 connections.

    cd examples/python-service && python3 -m unittest discover -s tests
"""

import asyncio
import time
import unittest

import aiohttp
from aiohttp import web

from plimsoll_service import contract
from plimsoll_service.connections import BoundedServer, leave_bounds

HEAD_S = 0.3
LATE_S = 0.3  # the contract's tolerances.timeout_late_ms
EARLY_S = 0.01
CAP = 5


def make_app() -> web.Application:
    async def healthz(request):
        return web.Response(text="ok\n")

    async def hold(request):
        await asyncio.sleep(int(request.query["ms"]) / 1000)
        return web.Response(text="held\n")

    async def upload(request):
        return web.Response(text=f"{len(await request.read())}\n")

    async def ws(request):
        sock = web.WebSocketResponse()
        await sock.prepare(request)
        leave_bounds(request)
        async for msg in sock:
            await sock.send_str(msg.data)
        return sock

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/hold", hold)
    app.router.add_post("/upload", upload)
    app.router.add_get("/ws", ws)
    return app


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length: (status, body)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(int(v) for k, _, v in (h.partition(": ") for h in lines[1:]) if k.lower() == "content-length")
    return int(lines[0].split()[1]), await reader.readexactly(length)


async def closed_after(reader: asyncio.StreamReader, since: float, give_up: float) -> float | None:
    """Seconds from `since` until the server closed the connection, or None if still open."""

    async def eof():
        try:
            while await reader.read(4096):
                pass
        except ConnectionError:
            pass
        return time.monotonic() - since

    try:
        return await asyncio.wait_for(eof(), give_up)
    except TimeoutError:
        return None


class BoundsTestCase(unittest.IsolatedAsyncioTestCase):
    head_timeout_ms = int(HEAD_S * 1000)

    async def asyncSetUp(self):
        self.server = BoundedServer(
            make_app(), head_timeout_ms=self.head_timeout_ms, max_connections=CAP, shutdown_timeout=1,
            handler_cancellation=True, access_log=None,
        )
        self.port = await self.server.start("127.0.0.1", 0)
        self.writers = []

    async def asyncTearDown(self):
        for w in self.writers:
            w.close()
        await self.server.stop()

    async def connect(self):
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers.append(writer)
        return reader, writer, time.monotonic()

    def assert_closed_in_time(self, after, what):
        self.assertIsNotNone(after, f"{what}: never closed")
        self.assertGreaterEqual(after, HEAD_S - EARLY_S, f"{what}: closed before the head timeout")
        self.assertLessEqual(after, HEAD_S + LATE_S, f"{what}: closed too long after the head timeout")


class HeadTimeoutTest(BoundsTestCase):
    async def test_silent_half_sent_and_idle_connections_are_closed_at_the_head_timeout(self):
        give_up = HEAD_S + LATE_S + 0.5
        silent_r, _, silent_t = await self.connect()
        half_r, half_w, half_t = await self.connect()
        half_w.write(b"POST /upload HTTP/1.1\r\nHost: test\r\nContent-Type: image/png\r\n")
        idle_r, idle_w, _ = await self.connect()
        idle_w.write(get("/healthz"))
        self.assertEqual(await read_response(idle_r), (200, b"ok\n"))
        idle_t = time.monotonic()
        silent, half, idle = await asyncio.gather(
            closed_after(silent_r, silent_t, give_up),
            closed_after(half_r, half_t, give_up),
            closed_after(idle_r, idle_t, give_up),
        )
        self.assert_closed_in_time(silent, "a silent connection")
        self.assert_closed_in_time(half, "a connection that sent half a request head")
        self.assert_closed_in_time(idle, "an idle keep-alive connection")

    async def test_a_running_request_is_not_cut_and_the_timer_restarts_after_its_answer(self):
        reader, writer, _ = await self.connect()
        writer.write(get("/hold?ms=800"))
        self.assertEqual(await read_response(reader), (200, b"held\n"))
        answered = time.monotonic()
        writer.write(get("/healthz"))  # the connection is still served after the long request
        self.assertEqual(await read_response(reader), (200, b"ok\n"))
        self.assert_closed_in_time(await closed_after(reader, answered, 2), "the connection after its answers")

    async def test_a_slow_upload_is_not_cut(self):
        reader, writer, _ = await self.connect()
        chunks = [b"x" * 10] * 5
        writer.write(f"POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: {10 * len(chunks)}\r\n\r\n".encode())
        for chunk in chunks:  # 0.75 s of body, well past the head timeout
            await asyncio.sleep(0.15)
            writer.write(chunk)
        self.assertEqual(await read_response(reader), (200, b"50\n"))

    async def test_a_websocket_outlives_the_head_timer_and_leaves_the_cap(self):
        async with aiohttp.ClientSession() as session:
            sockets = [await session.ws_connect(f"http://127.0.0.1:{self.port}/ws") for _ in range(CAP)]
            await asyncio.sleep(HEAD_S + LATE_S)
            for i, sock in enumerate(sockets):
                await sock.send_str(f"hello {i}")
                self.assertEqual((await sock.receive(timeout=1)).data, f"hello {i}")
            # The upgraded connections hold no place: a plain connection is still served.
            reader, writer, _ = await self.connect()
            writer.write(get("/healthz"))
            self.assertEqual(await read_response(reader), (200, b"ok\n"))
            for sock in sockets:
                await sock.close()


class ConnectionCapTest(BoundsTestCase):
    head_timeout_ms = 5000  # out of the way: this test is about the cap

    async def test_one_past_the_cap_is_closed_unanswered_and_a_freed_place_serves_again(self):
        held = []
        for _ in range(CAP):
            reader, writer, _ = await self.connect()
            writer.write(get("/healthz"))
            self.assertEqual(await read_response(reader), (200, b"ok\n"))
            held.append((reader, writer))
        self.assertEqual(self.server.cap.open, CAP)

        reader, writer, opened = await self.connect()
        writer.write(get("/healthz"))
        try:
            answer = await asyncio.wait_for(reader.read(4096), 1)
        except ConnectionError:
            answer = b""
        self.assertEqual(answer, b"", "the connection past the cap was answered")
        self.assertLess(time.monotonic() - opened, 1)

        for reader, writer in held:  # the open ones are still served
            writer.write(get("/healthz"))
            self.assertEqual(await read_response(reader), (200, b"ok\n"))

        _, writer = held.pop()
        writer.close()
        freed = time.monotonic()
        while True:
            reader, writer, _ = await self.connect()
            writer.write(get("/healthz"))
            try:
                self.assertEqual(await read_response(reader), (200, b"ok\n"))
                break
            except (asyncio.IncompleteReadError, ConnectionError):
                self.assertLess(time.monotonic() - freed, 1, "a freed place was not served again within 1 s")
                await asyncio.sleep(0.02)
        self.assertEqual(self.server.cap.open, CAP)


class ContractBoundsTest(unittest.TestCase):
    def test_values_and_overrides_come_from_the_contract(self):
        s = contract.settings_from_env({})
        b4 = s.doc["connections"]
        self.assertEqual((s.head_timeout_ms, s.max_connections), (b4["head_timeout_ms"], b4["max_connections"]))
        s = contract.settings_from_env({"HEAD_TIMEOUT_MS": "2000", "MAX_CONNECTIONS": "64"})
        self.assertEqual((s.head_timeout_ms, s.max_connections), (2000, 64))
        self.assertEqual(s.doc["connections"]["head_timeout_ms"], 2000)

    def test_the_cap_must_exceed_what_the_pools_hold(self):
        with self.assertRaises(contract.ContractError):
            contract.settings_from_env({"HEAD_TIMEOUT_MS": "0"})
        # 4 + 2 digitize, 4 + 0 export: 10 requests may sit on open connections.
        with self.assertRaises(contract.ContractError):
            contract.settings_from_env({"QUEUE_CAPACITY": "2", "MAX_CONNECTIONS": "10"})
        self.assertEqual(contract.settings_from_env({"QUEUE_CAPACITY": "2", "MAX_CONNECTIONS": "11"}).max_connections, 11)


if __name__ == "__main__":
    unittest.main()
