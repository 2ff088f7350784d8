"""B4 Connection bounds: the head timeout and the connection cap, and the serving loop that
applies them.

How aiohttp (3.14, pinned in requirements.txt) is put together, and where each bound goes:

- `web.AppRunner(app).server` is a `web.Server`, aiohttp's protocol factory: `loop.create_server`
  calls it once per accepted connection and gets a `web.RequestHandler`, the protocol that
  parses requests and runs the handlers of that connection.

- The head timeout is that `RequestHandler`'s own keep-alive timer (`keepalive_timeout`, set here
  to head_timeout_ms). It is armed when the connection is made and re-armed when each response
  has been written, and when it fires it closes the connection only if the handler is still
  waiting for a complete request head (`_process_keepalive` checks its `_waiter`). So it closes a
  silent connection, one whose head stalls half-way, and an idle keep-alive connection, each
  head_timeout_ms after opening or after the last response, and never a connection whose request
  is running or whose body is being uploaded (no head is awaited then; the body has B1's upload
  read timeout). A WebSocket upgrade switches it off for good (`WebSocketResponse.prepare` calls
  `keep_alive(False)`). tests/test_connections.py pins this behaviour, so an aiohttp upgrade
  that changed it would be caught there.

- aiohttp has no connection cap. `BoundedConnection` wraps the protocol factory: a connection
  that finds every place taken is closed at once, before aiohttp ever sees it (no request is
  read, nothing is answered), and the connections already open are untouched. A place is given
  back when its connection is lost, or when it is upgraded to the relay WebSocket
  (`leave_bounds`): the contract takes upgraded connections out of this bound, the relay pool
  (R1) bounds their work.

The cap is a wrapper rather than a `RequestHandler` subclass because `web.Server` constructs its
`RequestHandler` itself, with no hook to substitute the class; the wrapper needs nothing of
aiohttp beyond the public `AppRunner.server` and asyncio's Protocol interface.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from aiohttp import web


class ConnectionCap:
    """At most `limit` places, taken by connections being served."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"the connection cap must be at least 1, got {limit}")
        self.limit = limit
        self.open = 0

    def take(self) -> bool:
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def give_back(self) -> None:
        self.open -= 1


class BoundedConnection(asyncio.Protocol):
    """The protocol asyncio drives for one accepted connection: aiohttp's request handler, made
    only once the connection holds a place of the cap, and told everything the transport says."""

    __slots__ = ("_cap", "_make_handler", "_handler", "_holds_place")

    def __init__(self, cap: ConnectionCap, make_handler: Callable[[], asyncio.Protocol]):
        self._cap = cap
        self._make_handler = make_handler
        self._handler: asyncio.Protocol | None = None
        self._holds_place = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._cap.take():
            # Past the cap: closed at once, unanswered, rather than left waiting for a place.
            transport.close()
            return
        self._holds_place = True
        self._handler = self._make_handler()
        self._handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._handler is not None:
            self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received() if self._handler is not None else None

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.leave()
        if self._handler is not None:
            self._handler.connection_lost(exc)

    def leave(self) -> None:
        """Gives the connection's place back (once)."""
        if self._holds_place:
            self._holds_place = False
            self._cap.give_back()


def leave_bounds(request: web.BaseRequest) -> None:
    """Takes an upgraded connection (the relay's WebSocket) out of the connection cap. Its head
    timer is already off: aiohttp stops it when the upgrade is accepted."""
    transport = request.transport
    protocol = transport.get_protocol() if transport is not None else None
    if isinstance(protocol, BoundedConnection):
        protocol.leave()


class BoundedServer:
    """Serves an aiohttp application with B4's bounds: `await start(host, port)`, then
    `await stop()` (which lets requests in flight finish for up to `shutdown_timeout` s)."""

    def __init__(
        self,
        app: web.Application,
        *,
        head_timeout_ms: int,
        max_connections: int,
        shutdown_timeout: float = 10.0,
        backlog: int = 128,
        **handler_args,
    ):
        if head_timeout_ms < 1:
            raise ValueError(f"the head timeout must be at least 1 ms, got {head_timeout_ms}")
        self.cap = ConnectionCap(max_connections)
        self.backlog = backlog
        # `keepalive_timeout` is the head timer (see the module's docstring); the other arguments
        # go to aiohttp's request handlers unchanged (handler_cancellation, access_log, ...).
        self.runner = web.AppRunner(
            app, keepalive_timeout=head_timeout_ms / 1000, shutdown_timeout=shutdown_timeout, **handler_args
        )
        self.listener: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int) -> int:
        """Runs the application's start-up and listens; returns the port (useful with port 0)."""
        await self.runner.setup()
        factory = self.runner.server
        assert factory is not None
        cap = self.cap
        loop = asyncio.get_running_loop()
        self.listener = await loop.create_server(
            lambda: BoundedConnection(cap, factory), host, port, backlog=self.backlog
        )
        return self.listener.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stops accepting, closes idle connections, lets requests in flight finish (up to the
        shutdown timeout), then runs the application's clean-up."""
        if self.listener is not None:
            self.listener.close()
        await self.runner.cleanup()
