"""PlimsollHold in a Starlette app under uvicorn on loopback, inside the app's own limit of two
workers (an asyncio.Semaphore taken by the outer middleware, as README.md shows).

Timings are judged with wide margins (half a hold either side), never exactly: a held request
cannot answer before its hold, so the lower bounds are certain, and the upper ones leave hundreds
of milliseconds to a loaded machine. Every test is bounded (`BOUND`).

    cd adapters/asgi && python3 -m pip install -r requirements-test.txt
    cd adapters/asgi && python3 -m unittest discover -s tests
"""

import asyncio
import json
import socket
import time
import unittest

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from plimsoll_asgi import PlimsollHold, enabled_from_env

HEADER = "X-Test-Hook"
HOLD = 1.0  # seconds: long beside loopback's latency and a loaded machine's pauses, short for a test
BOUND = 20  # seconds: every test ends within this, whatever the server does


class Limit:
    """The app's own concurrency limit: at most `workers` requests inside at once."""

    def __init__(self, app, workers: int):
        self.app = app
        self.permits = asyncio.Semaphore(workers)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        async with self.permits:
            await self.app(scope, receive, send)


def make_app(workers: int, calls: list, enabled: bool = True) -> Starlette:
    async def work(request):
        calls.append(request.url.path)
        return PlainTextResponse("done")

    async def echo(request):
        calls.append(request.url.path)
        return PlainTextResponse(await request.body())

    return Starlette(
        routes=[Route("/", work), Route("/other", work), Route("/echo", echo, methods=["POST"])],
        # The first is the outermost: the limit takes its permit, then the hold waits inside it.
        middleware=[
            Middleware(Limit, workers=workers),
            Middleware(PlimsollHold, header=HEADER, enabled=enabled),
        ],
    )


class Served:
    """A uvicorn server on a loopback port of its own, in the test's event loop."""

    def __init__(self, app):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))

    async def __aenter__(self):
        self.task = asyncio.ensure_future(self.server.serve(sockets=[self.sock]))
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc):
        self.server.should_exit = True
        await asyncio.wait_for(self.task, BOUND)
        self.sock.close()


def client() -> httpx.AsyncClient:
    """The tests' client, made before any clock starts (making one costs milliseconds: TLS set-up
    even for plain HTTP). Each concurrent request gets a connection of its own from its pool."""
    return httpx.AsyncClient(timeout=BOUND, verify=False)


async def get(client: httpx.AsyncClient, url: str, hook: str | None, since: float):
    """One GET: (status, content type, body, seconds since `since`)."""
    headers = {} if hook is None else {HEADER: hook}
    r = await client.get(url, headers=headers)
    return r.status_code, r.headers.get("content-type"), r.text, time.monotonic() - since


class HoldTest(unittest.IsolatedAsyncioTestCase):
    async def bounded(self, test):
        await asyncio.wait_for(test, BOUND)

    async def test_of_three_held_requests_two_start_at_once_and_the_third_after_a_hold(self):
        async def test():
            calls = []
            async with Served(make_app(2, calls)) as served, client() as c:
                hook = f"hold=queue:{int(HOLD * 1000)}"
                start = time.monotonic()
                answers = await asyncio.gather(*(get(c, served.url, hook, start) for _ in range(3)))
            self.assertEqual([a[0] for a in answers], [200] * 3, answers)
            after = sorted(a[3] for a in answers)
            for t in after[:2]:
                self.assertGreaterEqual(t, HOLD, f"answered before its hold: {after}")
                self.assertLess(t, HOLD * 1.5, f"the first two did not start at once: {after}")
            self.assertGreaterEqual(after[2], HOLD * 1.5, f"the third held no permit's wait: {after}")
            self.assertEqual(len(calls), 3)

        await self.bounded(test())

    async def test_a_hook_the_middleware_cannot_honour_gets_400_naming_it(self):
        async def test():
            calls = []
            async with Served(make_app(2, calls)) as served, client() as c:
                for hook, directive in [
                    ("hold=queue", "hold=queue"),
                    ("fail=decode", "fail=decode"),
                    ("hold=queue:10;panic=segment", "panic=segment"),
                    ("alloc=+64", "alloc=64"),
                    ("explode=now", "explode=now"),
                ]:
                    status, content_type, body, _ = await get(c, served.url, hook, time.monotonic())
                    self.assertEqual(status, 400, (hook, body))
                    self.assertEqual(content_type, "application/problem+json")
                    problem = json.loads(body)
                    self.assertEqual(problem["directive"], directive, problem)
                    self.assertEqual(problem["status"], 400)
                    self.assertEqual(problem["code"], "invalid_parameter")
            self.assertEqual(calls, [])

        await self.bounded(test())

    async def test_disabled_the_header_is_ignored_and_nothing_is_held(self):
        async def test():
            calls = []
            async with Served(make_app(1, calls, enabled=False)) as served, client() as c:
                for hook in [f"hold=queue:{int(HOLD * 4000)}", "fail=decode", "not a hook"]:
                    status, _, _, after = await get(c, served.url, hook, time.monotonic())
                    self.assertEqual(status, 200, hook)
                    self.assertLess(after, HOLD, f"{hook} was held")
            self.assertEqual(len(calls), 3)

        await self.bounded(test())

    async def test_a_client_that_leaves_ends_its_hold_and_frees_its_permit_at_once(self):
        async def test():
            calls = []
            async with Served(make_app(1, calls)) as served, client() as c:
                # Held far longer than the test waits: only its end can free the one permit.
                reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
                hook = f"hold=queue:{int(HOLD * 20_000)}"
                writer.write(f"GET / HTTP/1.1\r\nHost: test\r\n{HEADER}: {hook}\r\n\r\n".encode())
                await writer.drain()
                # While it holds, the pool is full: a plain request waits.
                with self.assertRaises(TimeoutError):
                    await asyncio.wait_for(get(c, served.url + "/other", None, time.monotonic()), HOLD)
                writer.close()
                await writer.wait_closed()
                status, _, _, after = await get(c, served.url, None, time.monotonic())
                self.assertEqual(status, 200)
                self.assertLess(after, HOLD * 2, "the permit came back late")
            # The one that left never reached its handler (the last request did). The probe, which
            # gave up while queued, still runs once admitted: uvicorn does not cancel an app whose
            # client left; only what reads the receive channel, as the hold does, sees it.
            self.assertEqual(calls.count("/"), 1, calls)

        await self.bounded(test())


    async def test_a_held_request_keeps_its_body(self):
        async def test():
            calls = []
            body = b"x" * 200_000  # several receive messages
            async with Served(make_app(1, calls)) as served, client() as c:
                r = await c.post(served.url + "/echo", content=body, headers={HEADER: "hold=queue:100"})
            self.assertEqual((r.status_code, r.content), (200, body))
            self.assertEqual(calls, ["/echo"])

        await self.bounded(test())


class EnabledTest(unittest.TestCase):
    def test_the_environment_turns_hooks_on_or_is_refused(self):
        for on in ["1", "true", " 1 "]:
            self.assertTrue(enabled_from_env("HOOKS", {"HOOKS": on}), on)
        for off in [{}, {"HOOKS": ""}, {"HOOKS": "0"}, {"HOOKS": "false"}]:
            self.assertFalse(enabled_from_env("HOOKS", off), off)
        with self.assertRaises(ValueError):
            enabled_from_env("HOOKS", {"HOOKS": "yes please"})

    def test_the_middleware_reads_its_variable_when_not_told(self):
        import os
        from unittest import mock

        with mock.patch.dict(os.environ, {"SOME_HOOKS": "1"}):
            self.assertTrue(PlimsollHold(None, enabled_env="SOME_HOOKS").enabled)
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertFalse(PlimsollHold(None).enabled)
        self.assertTrue(PlimsollHold(None, enabled=True).enabled)


if __name__ == "__main__":
    unittest.main()
