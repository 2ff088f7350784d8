"""`PlimsollHold`: the ASGI middleware that honours the test-hook header's `hold`."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable

from .hooks import HookError, parse_hooks

PROBLEM_CONTENT_TYPE = "application/problem+json"
# The code the reference server answers a malformed hook with, so the checker reads both alike.
INVALID_PARAMETER = "invalid_parameter"


def enabled_from_env(name: str, environ=os.environ) -> bool:
    """Whether `name` turns hooks on: `1` or `true`; unset, empty, `0` or `false` leave them off.
    Anything else raises ValueError, so a typo does not silently disable the checks that need a
    hold (the reference server reads its `PLIMSOLL_TEST_HOOKS` the same way)."""
    value = environ.get(name)
    if value is None:
        return False
    v = value.strip()
    if v in ("1", "true"):
        return True
    if v in ("", "0", "false"):
        return False
    raise ValueError(f"{name}={value!r}: expected 1 or true (hooks on), 0, false or empty (off)")


class PlimsollHold:
    """Holds a request that asks for it (`hold=STAGE:MS`), then hands it to `app`.

    Place it *inside* the app's concurrency limit (the middleware that takes the pool's
    semaphore, or the server's own limit): the hold then happens while the request owns its
    permit, so the pool really has one worker fewer. In Starlette's `middleware=[...]` the first
    entry is the outermost: the limiter first, this after it.

    - Every `hold` counts, whatever its stage (a generic app has no stages of its own), as one
      wait before `app` is called; several add up.
    - `fail`, `panic` and `alloc` act inside a handler, which a middleware cannot reach, and a
      header the grammar refuses is no hold: both are answered `400` with a problem+json body whose
      `directive` member quotes the directive, and `app` is not called.
    - The client leaving (`http.disconnect` on the receive channel) ends the hold: `app` is never
      called and the limiter outside gets its permit back at once. While holding, the request's
      body messages are read (to see the disconnect behind them) and handed to `app` afterwards.
    - Disabled, the header is not read: every request goes straight to `app`.

    `enabled`: True or False, or None to read the environment variable `enabled_env`.
    `stages`: the stage names the contract's grammar allows (None: any lowercase name).
    """

    def __init__(
        self,
        app,
        header: str = "X-Plimsoll-Hook",
        enabled: bool | None = None,
        enabled_env: str = "PLIMSOLL_TEST_HOOKS",
        stages: Iterable[str] | None = None,
    ):
        self.app = app
        self.header = header
        self._key = header.lower().encode("latin-1")
        self.enabled = enabled_from_env(enabled_env) if enabled is None else bool(enabled)
        self.stages = None if stages is None else frozenset(stages)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.enabled:
            await self.app(scope, receive, send)
            return
        # Repeated fields are read as one list, so no directive in a second field goes unread.
        values = [v.decode("latin-1") for k, v in scope["headers"] if k == self._key]
        if not values:
            await self.app(scope, receive, send)
            return
        try:
            directives = parse_hooks(";".join(values), self.stages)
        except HookError as e:
            await self._refuse(send, e.directive, str(e))
            return
        for d in directives:
            if d.kind != "hold":
                await self._refuse(
                    send, str(d), f"`{d}` acts inside a handler, which this middleware cannot reach: it honours only `hold`"
                )
                return
        if not directives:
            await self.app(scope, receive, send)
            return
        ms = sum(d.number for d in directives)
        held = await _hold(ms / 1000, receive)
        if held is None:
            return  # the client left: no handler, and the permit outside is released
        await self.app(scope, held, send)

    async def _refuse(self, send, directive: str, detail: str) -> None:
        body = json.dumps(
            {
                "type": f"urn:plimsoll:error:{INVALID_PARAMETER}",
                "title": f"The test hook in `{self.header}` cannot be honoured",
                "status": 400,
                "detail": detail,
                "error": detail,
                "code": INVALID_PARAMETER,
                "directive": directive,
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


# asyncio.sleep's longest wait: larger values overflow the event loop's timer.
_LONGEST = 10**9


async def _hold(seconds: float, receive):
    """Waits `seconds` unless the client leaves first. Returns the receive channel `app` reads
    (the messages read meanwhile first), or None when the client left."""
    read: list[dict] = []

    async def watch() -> None:
        while True:
            message = await receive()
            read.append(message)
            if message["type"] == "http.disconnect":
                return

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({watcher}, timeout=min(seconds, _LONGEST))
    finally:
        if not watcher.done():
            watcher.cancel()
            try:
                await watcher
            except asyncio.CancelledError:
                pass
    if watcher.done() and not watcher.cancelled() and watcher.exception() is not None:
        raise watcher.exception()  # the server's receive failed: not a hold that ended
    if read and read[-1]["type"] == "http.disconnect":
        return None

    async def replay():
        if read:
            return read.pop(0)
        return await receive()

    return replay
