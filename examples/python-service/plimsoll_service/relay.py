"""The relay bridge (R1-R6): HTTP requests as envelopes over one WebSocket.

Each `relay-http-request` text frame becomes a task that waits for a slot of the relay pool (FIFO,
never refused), performs the request against this server's own HTTP API, and answers with
`relay-http-response` frames (bodies over max_frame_body_bytes split into several frames, headers
on the first). Frames are written under a per-connection lock, one whole frame at a time, so
concurrent responses interleave only at frame boundaries. When the socket goes away, its queued
and running envelopes are cancelled and their answers dropped.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re

import aiohttp
from aiohttp import web

from .jobs import parse_hooks
from .problems import Problem

HOP_BY_HOP = {"host", "connection", "content-length", "transfer-encoding", "upgrade", "keep-alive", "te", "trailer"}
TEXT_TYPES = re.compile(r"^(text/|application/([a-z0-9.+-]*\+)?json|image/svg\+xml|application/xml)")


async def start_client(app: web.Application) -> None:
    # No connection limit: the relay pool is the bound (R1), not the HTTP client.
    app["svc"].http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False)


async def stop_client(app: web.Application) -> None:
    if app["svc"].http is not None:
        await app["svc"].http.close()


class Connection:
    def __init__(self, ws: web.WebSocketResponse, max_chunk: int):
        self.ws = ws
        self.max_chunk = max_chunk
        self.lock = asyncio.Lock()

    async def send(self, frame: dict) -> None:
        async with self.lock:  # R5: one whole frame at a time
            await self.ws.send_str(json.dumps(frame))

    async def respond(self, request_id: str, status: int, headers: dict, body: str) -> None:
        chunks = split_utf8(body, self.max_chunk)
        for seq, chunk in enumerate(chunks):
            frame = {
                "type": "relay-http-response",
                "request_id": request_id,
                "seq": seq,
                "status": status,
                "body_chunk": chunk,
                "final": seq == len(chunks) - 1,
            }
            if seq == 0:
                frame["headers"] = headers
            await self.send(frame)

    async def error(self, request_id: str, detail: str) -> None:
        await self.send({
            "type": "relay-error",
            "request_id": request_id,
            "seq": 0,
            "status": 400,
            "code": "invalid_parameter",
            "body_chunk": detail,
            "final": True,
        })


def split_utf8(text: str, max_bytes: int) -> list[str]:
    """Chunks of at most max_bytes UTF-8 bytes, never splitting a character; at least one."""
    data = text.encode()
    chunks, start = [], 0
    while start < len(data):
        end = min(len(data), start + max_bytes)
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end -= 1
        chunks.append(data[start:end].decode())
        start = end
    return chunks or [""]


def parse_envelope(raw: str) -> tuple[dict | None, str, str | None]:
    """Returns (envelope, request_id, error)."""
    try:
        env = json.loads(raw)
    except ValueError as exc:
        return None, "", f"the frame is not JSON: {exc}"
    if not isinstance(env, dict):
        return None, "", "the frame is not a JSON object"
    rid = env.get("request_id")
    rid = rid if isinstance(rid, str) else ""
    if env.get("type") != "relay-http-request":
        return None, rid, "`type` must be `relay-http-request`"
    if not rid:
        return None, rid, "`request_id` must be a non-empty string"
    if not isinstance(env.get("method"), str) or not env["method"]:
        return None, rid, "`method` must be a string"
    if not isinstance(env.get("path"), str) or not env["path"].startswith("/"):
        return None, rid, "`path` must be a string starting with /"
    headers = env.setdefault("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return None, rid, "`headers` must be an object of strings"
    if not isinstance(env.setdefault("body", ""), str):
        return None, rid, "`body` must be a string"
    return env, rid, None


async def handler(request: web.Request) -> web.WebSocketResponse:
    svc = request.app["svc"]
    ws = web.WebSocketResponse(max_msg_size=svc.settings.api["export"]["max_upload_bytes"] * 2)
    try:
        upgradable = ws.can_prepare(request).ok
    except ValueError:  # aiohttp 3.14 lets a non-ASCII Sec-WebSocket-Key through as ValueError
        upgradable = False
    if not upgradable:
        raise Problem(
            "upgrade_required",
            f"{request.path} is a WebSocket endpoint: send a WebSocket upgrade request",
            headers={"Upgrade": "websocket"},
        )
    await ws.prepare(request)
    conn = Connection(ws, svc.settings.max_frame_body_bytes)
    tasks: set[asyncio.Task] = set()
    try:
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                env, rid, problem = parse_envelope(msg.data)
                if problem is not None:
                    await _quietly(conn.error(rid, problem))
                    continue
                task = asyncio.create_task(relay_one(svc, conn, env))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            elif msg.type == aiohttp.WSMsgType.BINARY:
                await _quietly(conn.error("", "envelopes are text frames"))
            else:
                break
    finally:
        # R6: the socket is gone; its envelopes are orphans (queued ones leave the queue).
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    return ws


async def _quietly(coro) -> None:
    try:
        await coro
    except (ConnectionError, RuntimeError, aiohttp.ClientError):
        pass  # the socket closed under us: nobody is left to tell


async def relay_one(svc, conn: Connection, env: dict) -> None:
    pool = svc.pools["relay"]
    headers = {k: v for k, v in env["headers"].items() if k.lower() not in HOP_BY_HOP}
    # `hold=relay:MS` holds this relay worker; the header goes on unchanged (the endpoint ignores
    # a directive for a stage it does not run, and answers hooks_disabled when hooks are off).
    hold_ms = 0
    if svc.settings.hooks_enabled:
        name = svc.settings.hooks["header"]
        for key in [k for k in headers if k.lower() == name.lower()]:
            try:
                hold_ms += parse_hooks(headers[key], True, svc.settings.stage_names, name).hold.get("relay", 0)
            except Problem:
                pass  # malformed: the endpoint it is forwarded to answers 400
    loop = asyncio.get_running_loop()
    try:
        await pool.acquire(loop.time(), None)
    except asyncio.CancelledError:
        pool.cancellations += 1
        pool.count("cancelled")
        raise
    try:
        if hold_ms:
            await asyncio.sleep(hold_ms / 1000)
        status, out_headers, body = await perform(svc, env, headers)
    except asyncio.CancelledError:
        pool.release()
        pool.cancellations += 1
        pool.count("cancelled")
        raise
    except Exception as exc:  # noqa: BLE001 - the hop failed: answer 502, keep the socket
        pool.release()
        pool.count("stage_failed")
        await _quietly(conn.respond(env["request_id"], 502, {"content-type": "text/plain"}, f"relay failed: {exc}"))
        return
    pool.release()
    pool.count("ok")
    await _quietly(conn.respond(env["request_id"], status, out_headers, body))


async def perform(svc, env: dict, headers: dict) -> tuple[int, dict, str]:
    """The envelope's request against this server's own HTTP API."""
    url = svc.self_url + env["path"]
    async with svc.http.request(env["method"], url, headers=headers, data=env["body"].encode() or None) as resp:
        raw = await resp.read()
        out = {k.lower(): v for k, v in resp.headers.items() if k.lower() not in HOP_BY_HOP}
        ctype = resp.headers.get("Content-Type", "")
        if TEXT_TYPES.match(ctype.lower()) or not raw:
            try:
                return resp.status, out, raw.decode()
            except UnicodeDecodeError:
                pass
        out["content-transfer-encoding"] = "base64"
        return resp.status, out, base64.b64encode(raw).decode()
