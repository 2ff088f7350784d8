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

from .connections import leave_bounds
from .jobs import parse_hooks
from .problems import PROBLEM_TYPE, Problem, problem_body

TEXT_TYPES = re.compile(r"^(text/|application/([a-z0-9.+-]*\+)?json|image/svg\+xml|application/xml)")


async def start_client(app: web.Application) -> None:
    # No connection limit: the relay pool is the bound (R1), not the HTTP client. An idle loopback
    # connection is dropped by this client well before this server's head timer (B4) would close
    # it, so an envelope (often a POST, which aiohttp does not retry) never goes out on a
    # connection the server is closing.
    svc = app["svc"]
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=svc.settings.head_timeout_ms / 2000)
    svc.http = aiohttp.ClientSession(connector=connector, auto_decompress=False)


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


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_FIELD_VALUE = re.compile(r"^[\t\x20-\x7e\x80-\xff]*$")
_PATH = re.compile(r"^/[\x21-\x7e]*$")
# Dropped from an envelope's headers on the way in (rule `relay-inner-request`): the envelope's own
# encoding and length, and what would break the loopback connection the request travels on.
NOT_FORWARDED = {"content-transfer-encoding", "content-length", "host", "connection", "upgrade",
                 "transfer-encoding", "keep-alive", "te", "trailer"}
# Never copied from the inner response into the first frame: the loopback connection's own.
NOT_RETURNED = {"connection", "content-length", "transfer-encoding", "keep-alive"}
_orphans: set[asyncio.Task] = set()  # running envelopes of dropped sockets, left to finish


def parse_envelope(raw: str) -> tuple[dict | None, str, str | None]:
    """Returns (envelope with `body_bytes`, request_id, what is wrong) - rule `relay-error`."""
    try:
        env = json.loads(raw)
    except ValueError as exc:
        return None, "", f"the message is not JSON: {exc}"
    if not isinstance(env, dict):
        return None, "", "the message is not a JSON object"
    rid = env.get("request_id")
    rid = rid if isinstance(rid, str) else ""
    if env.get("type") != "relay-http-request":
        return None, rid, "`type` must be `relay-http-request`"
    if not rid:
        return None, rid, "`request_id` must be a non-empty string"
    if not isinstance(env.get("method"), str) or not _TOKEN.match(env["method"]):
        return None, rid, "`method` must be an HTTP method"
    if not isinstance(env.get("path"), str) or not _PATH.match(env["path"]):
        return None, rid, "`path` must start with / and hold no blanks or control characters"
    headers = env.setdefault("headers", {})
    if not isinstance(headers, dict):
        return None, rid, "`headers` must be an object of strings"
    for name, value in headers.items():
        if not _TOKEN.match(name) or not isinstance(value, str) or not _FIELD_VALUE.match(value):
            return None, rid, f"header {name!r} is not a valid HTTP header"
    body = env.setdefault("body", "")
    if not isinstance(body, str):
        return None, rid, "`body` must be a string"
    cte = next((v for k, v in headers.items() if k.lower() == "content-transfer-encoding"), None)
    if cte is not None and cte.strip().lower() == "base64":
        try:
            env["body_bytes"] = base64.b64decode(body, validate=True)
        except ValueError:
            return None, rid, "`body` is not base64 although content-transfer-encoding says so"
    else:
        env["body_bytes"] = body.encode()
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
    leave_bounds(request)  # B4: an upgraded connection leaves the connection cap; R1 bounds its work
    conn = Connection(ws, svc.settings.max_frame_body_bytes)
    tasks: dict[asyncio.Task, dict] = {}
    try:
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                env, rid, problem = parse_envelope(msg.data)
            elif msg.type == aiohttp.WSMsgType.BINARY:
                env, rid, problem = None, "", "envelopes are text messages"
            else:
                break
            if problem is not None:
                svc.log.error(rid, "request", problem, None, code="invalid_parameter", status=400, relay=True)
                await _quietly(conn.error(rid, problem))
                continue
            state = {"running": False}
            task = asyncio.create_task(relay_one(svc, conn, env, state))
            tasks[task] = state
            task.add_done_callback(lambda t: tasks.pop(t, None))
    finally:
        # R6: the socket is gone. Queued envelopes leave the queue; running ones finish and their
        # frames are dropped (sending to a closed socket is a no-op below).
        for task, state in list(tasks.items()):
            if state["running"]:
                _orphans.add(task)
                task.add_done_callback(_orphans.discard)
            else:
                task.cancel()
    return ws


async def _quietly(coro) -> None:
    try:
        await coro
    except (ConnectionError, RuntimeError, aiohttp.ClientError):
        pass  # the socket closed under us: nobody is left to tell


async def relay_one(svc, conn: Connection, env: dict, state: dict) -> None:
    pool = svc.pools["relay"]
    s = svc.settings
    hook_name = s.hooks["header"]
    hook = next((v for k, v in env["headers"].items() if k.lower() == hook_name.lower()), None)
    # Rule `relay-hooks`: the hook header is authorised before the envelope takes a worker.
    hold_ms = 0
    if hook is not None:
        try:
            hold_ms = parse_hooks(hook, s.hooks_enabled, s.stage_names, hook_name).hold_ms("relay")
        except Problem as p:
            rid = svc.ids.pick(next((v for k, v in env["headers"].items() if k.lower() == "x-request-id"), None))
            svc.log.error(rid, p.stage, p.detail, p, code=p.code, status=s.errors[p.code]["status"], relay=True)
            body = json.dumps(problem_body(s.errors, p, rid))
            headers = {"content-type": PROBLEM_TYPE, "x-request-id": rid}
            await _quietly(conn.respond(env["request_id"], s.errors[p.code]["status"], headers, body))
            return
    headers = {k: v for k, v in env["headers"].items() if k.lower() not in NOT_FORWARDED}
    loop = asyncio.get_running_loop()
    try:
        await pool.acquire(loop.time(), None)
    except asyncio.CancelledError:
        pool.cancellations += 1
        pool.count("cancelled")
        raise
    state["running"] = True
    try:
        if hold_ms:
            await asyncio.sleep(hold_ms / 1000)
        try:
            status, out_headers, body = await perform(svc, env, headers)
        except Exception as exc:  # noqa: BLE001 - the hop failed: answer 502, keep the socket
            pool.count("stage_failed")
            await _quietly(conn.respond(env["request_id"], 502, {"content-type": "text/plain"}, f"relay failed: {exc}"))
            return
        # Rule `relay-pool`: the worker is held until the last frame is sent.
        await _quietly(conn.respond(env["request_id"], status, out_headers, body))
        pool.count("ok")
    finally:
        pool.release()


async def perform(svc, env: dict, headers: dict) -> tuple[int, dict, str]:
    """The envelope's request against this server's own HTTP API."""
    url = svc.self_url + env["path"]
    data = env["body_bytes"] or None
    async with svc.http.request(env["method"], url, headers=headers, data=data) as resp:
        raw = await resp.read()
        out = {k.lower(): v for k, v in resp.headers.items() if k.lower() not in NOT_RETURNED}
        ctype = resp.headers.get("Content-Type", "")
        if TEXT_TYPES.match(ctype.lower()) or not raw:
            try:
                return resp.status, out, raw.decode()
            except UnicodeDecodeError:
                pass
        out["content-transfer-encoding"] = "base64"
        return resp.status, out, base64.b64encode(raw).decode()
