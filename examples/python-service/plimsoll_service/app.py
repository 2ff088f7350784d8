"""HTTP surface: every endpoint of spec/openapi.json, request ids, problem responses, and the path
of a pipeline request: validate -> read the body (bounded) -> admission -> worker -> answer.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from . import export as export_mod
from . import pipeline, relay
from .admission import Overloaded, Pool, QueueTimeout, render_metrics
from .contract import MB, Settings
from .jobs import Job, job_problem, parse_hooks, run_job
from .problems import JsonLog, Problem, RequestIds, problem_response
from .uploads import UploadBudget, UploadShare

OUTCOME = {
    "overloaded": "overloaded",
    "timeout": "timeout",
    "memory_cap_exceeded": "memory_cap_exceeded",
    "stage_failed": "stage_failed",
}  # every other code (400s, 408) counts as `invalid`

# Rule `query-parameters`: a decimal number is an optional sign, digits with an optional fraction
# or a fraction alone, then an optional exponent, once Unicode White_Space around it is dropped.
DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


class Service:
    def __init__(self, settings: Settings, log: JsonLog, temp_root: str):
        self.settings = settings
        self.log = log
        self.temp_root = temp_root
        s = settings
        self.pools = {
            name: Pool(ps, s.window_samples, s.min_seconds, s.empty_window_seconds)
            for name, ps in s.pools.items()
        }
        self.executors = {
            name: ThreadPoolExecutor(s.pools[name].workers, thread_name_prefix=name)
            for name in ("digitize", "export")
        }
        self.uploads = UploadBudget(s.upload_budget_mb * MB)  # B5: shared by every request
        self.ids = RequestIds(s.client_id_max_len, s.client_id_extra_chars)
        self.self_url: str | None = None  # where the relay performs envelopes (set at start-up)
        self.http = None  # aiohttp.ClientSession for the relay

    def temp_files(self) -> int:
        try:
            return len(os.listdir(self.temp_root))
        except OSError:
            return 0

    # --- request validation ---------------------------------------------------------------

    @staticmethod
    def reject_unknown(request: web.Request, known) -> None:
        for name in request.query:
            if name not in known:
                raise Problem(
                    "invalid_parameter", f"unknown parameter `{name}` (known: {', '.join(known) or 'none'})"
                )

    def digitize_params(self, request: web.Request) -> dict:
        params = self.settings.api["digitize"]["params"]
        self.reject_unknown(request, list(params))
        out = {}
        for name, spec in params.items():
            values = request.query.getall(name, [])
            if len(values) > 1:
                raise Problem("invalid_parameter", f"`{name}` is given {len(values)} times")
            integer = spec["kind"] == "integer"
            if not values:
                out[name] = int(spec["default"]) if integer else float(spec["default"])
                continue
            raw = values[0]
            try:
                # Python's float() takes more than the rule's grammar (`1_000`, `inf`, `nan`,
                # non-ASCII digits): the text must match it first.
                if not DECIMAL.fullmatch(raw.strip(WHITE_SPACE)):
                    raise ValueError
                value = float(raw.strip(WHITE_SPACE))
                if integer:  # JSON Schema's integer: a number without a fractional part (6, 6.0)
                    if not value.is_integer():
                        raise ValueError
                    value = int(value)
            except (ValueError, OverflowError):
                kind = "an integer" if integer else "a number"
                raise Problem("invalid_parameter", f"`{name}` must be {kind}, got {raw!r}") from None
            if not math.isfinite(value):
                raise Problem("invalid_parameter", f"`{name}` must be finite, got {raw!r}")
            if not spec["min"] <= value <= spec["max"]:
                raise Problem(
                    "invalid_parameter",
                    f"`{name}` must be between {spec['min']:g} and {spec['max']:g} {spec['unit']}, got {raw}",
                )
            out[name] = value
        return out

    def export_format(self, request: web.Request) -> str:
        ep = self.settings.api["export"]
        self.reject_unknown(request, ["format"])
        values = request.query.getall("format", [])
        if len(values) > 1:
            raise Problem("invalid_parameter", f"`format` is given {len(values)} times")
        fmt = values[0] if values else ep["default_format"]
        if fmt not in ep["formats"]:
            raise Problem("invalid_parameter", f"`format` must be one of {', '.join(ep['formats'])}, got {fmt!r}")
        return fmt

    def check_content_type(self, request: web.Request, kind: str) -> None:
        """Rule `input-order` (3): an absent Content-Type is accepted; a present one must name a
        media type the endpoint takes (case and parameters aside). The bytes decide the format."""
        allowed = self.settings.api[kind]["content_types"]
        got = request.headers.get("Content-Type")
        if got is not None and request.content_type.lower() not in allowed:
            # Refused before admission: no stage ran, so the body names none (log stage `request`).
            what = "images" if kind == "digitize" else "designs"
            raise Problem("unsupported_format", f"expected {' or '.join(allowed)} ({what}), got {got}")

    async def read_body(self, request: web.Request, limit: int, pool: Pool, share: UploadShare) -> bytes:
        """B1: the body is read before admission, within the upload read timeout, and bounded.

        B5: the body is charged to `share` of the upload budget, which the caller gives back when
        the request ends. A declared length is reserved whole before a byte is read, so an upload
        that would not fit is refused unread; a body without one is charged chunk by chunk, so the
        charge is what is really held. Past the endpoint's limit is payload_too_large first, but
        only once the body has ended (rule `upload-read`): its bytes are read and dropped within
        the same read timeout, so a client still sending reads the 400 rather than a reset, one
        that never ends is upload_timeout, and past four times the limit reading stops."""
        too_large = Problem("payload_too_large", f"the upload is larger than {limit} bytes")
        declared = request.content_length
        oversize = declared is not None and declared > limit
        if not oversize and declared is not None and not share.reserve(declared):
            raise self.over_budget(pool)
        chunks, size = [], 0
        timeout_ms = self.settings.upload_read_timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                async for chunk in request.content.iter_chunked(256 * 1024):
                    size += len(chunk)
                    oversize = oversize or size > limit
                    if oversize:
                        if size > 4 * limit:
                            break  # stop draining: answered, then the connection closes
                        continue  # drained: nothing kept, nothing charged
                    if not share.reserve(size):  # within a declared length: already reserved
                        raise self.over_budget(pool)
                    chunks.append(chunk)
        except TimeoutError:
            raise Problem("upload_timeout", f"the request body did not arrive within {timeout_ms} ms") from None
        if oversize:
            raise too_large
        if size == 0:
            raise Problem("empty_body", "the request body is empty")
        return b"".join(chunks)

    def over_budget(self, pool: Pool) -> Problem:
        """B5: the server is full of bytes rather than of workers, and the client's remedy is the
        same: the pool's overload answer with its Retry-After. No slot was asked for, so nothing
        goes into T3's window (`Pool.retry_after` records no sample)."""
        retry = pool.retry_after()
        return Problem(
            "overloaded",
            f"the request bodies held would exceed the upload budget of {self.settings.upload_budget_mb} MB; "
            f"retry after {retry} s",
            stage="admission",
            retry_after=retry,
        )

    # --- a pipeline request -----------------------------------------------------------------

    async def pipeline_request(self, request: web.Request, kind: str) -> web.Response:
        """B5: the body's share of the upload budget is held from its first byte through the queue
        wait and the job (the body is in memory all that time) and given back when the request
        ends, on every path: answer, refusal, failure, timeout, client gone."""
        share = self.uploads.share()
        try:
            return await self._pipeline_request(request, kind, share)
        finally:
            share.release()

    async def _pipeline_request(self, request: web.Request, kind: str, share: UploadShare) -> web.Response:
        s = self.settings
        pool = self.pools[kind]
        rid = request["rid"]
        try:
            hooks = parse_hooks(
                request.headers.get(s.hooks["header"]), s.hooks_enabled, s.stage_names, s.hooks["header"]
            )
            if kind == "digitize":
                args = (self.digitize_params(request), s.api["digitize"]["max_pixels"], s.design)
            else:
                args = (self.export_format(request), s.design)
            self.check_content_type(request, kind)
            body = await self.read_body(request, s.api[kind]["max_upload_bytes"], pool, share)
        except Problem as p:
            pool.count(OUTCOME.get(p.code, "invalid"))  # B5's budget refusal counts as `overloaded`
            p.headers["Server-Timing"] = _timing(0.0, 0.0)  # never queued, never ran
            raise

        loop = asyncio.get_running_loop()
        admitted = loop.time()
        timeout_ms = s.pools[kind].timeout_ms
        deadline = admitted + timeout_ms / 1000
        try:
            started = await pool.acquire(admitted, deadline)
        except Overloaded as o:
            pool.count("overloaded")
            raise Problem(
                "overloaded", o.detail, stage="admission", retry_after=o.retry_after,
                headers={"Server-Timing": _timing(0.0, 0.0)},
            ) from None
        except QueueTimeout:
            pool.count("timeout")
            raise Problem(
                "timeout",
                f"{kind} exceeded its {timeout_ms} ms timeout while waiting for a worker",
                stage="queue",
                failed_stage="queue",
                completed_stages=[],
                headers={"Server-Timing": _timing(loop.time() - admitted, 0.0)},
            ) from None
        except asyncio.CancelledError:
            self._cancelled(pool, rid, "queue")
            raise

        job = Job(kind, rid, s.stages[kind], hooks, deadline, timeout_ms, s.memory_cap_mb, self.temp_root)
        fn = pipeline.digitize if kind == "digitize" else export_mod.export
        try:
            result = await run_job(self.executors[kind], job, fn, body, *args)
        except asyncio.CancelledError:
            pool.release()
            self._cancelled(pool, rid, job.stage)
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of a job has a contract answer
            pool.release()
            problem = job_problem(job, exc)
            pool.count(OUTCOME.get(problem.code, "invalid"))
            problem.headers["Server-Timing"] = _timing(started - admitted, loop.time() - started)
            raise problem from None
        pool.release()
        pool.count("ok")
        headers = {"Server-Timing": _timing(started - admitted, loop.time() - started)}
        if kind == "digitize":
            return web.Response(body=result, content_type="application/json", headers=headers)
        fmt = args[0]
        headers["Content-Disposition"] = f'attachment; filename="design.{fmt}"'
        return web.Response(body=result, content_type=export_mod.CONTENT_TYPES[fmt], headers=headers)

    def _cancelled(self, pool: Pool, rid: str, stage: str) -> None:
        pool.cancellations += 1
        pool.count("cancelled")
        # Not an error line (no answer is owed, rule `error-line`): none of stage/error/stack.
        self.log.write("warn", "client went away; job stopped", request_id=rid, at=stage, pool=pool.name)


def _timing(queue_s: float, run_s: float) -> str:
    return f"queue;dur={queue_s * 1000:.1f}, run;dur={run_s * 1000:.1f}"


# --- the application --------------------------------------------------------------------------


@web.middleware
async def request_ids_and_problems(request: web.Request, handler):
    svc: Service = request.app["svc"]
    rid = svc.ids.pick(request.headers.get("X-Request-Id"))
    request["rid"] = rid
    try:
        return await handler(request)
    except Problem as p:
        return svc_problem(svc, request, p)
    except web.HTTPMethodNotAllowed as exc:
        # Rule `routes`: a known path with another method is 405 with Allow (RFC 9110). 405 is no
        # contract error code: no problem body, no error line.
        return web.Response(status=405, headers={"Allow": ", ".join(sorted(exc.allowed_methods))})
    except web.HTTPNotFound:
        return svc_problem(svc, request, Problem("not_found", f"no route for {request.method} {request.path}"))
    except (web.HTTPException, asyncio.CancelledError):
        raise
    except Exception as exc:
        # A bug: aiohttp answers 500; the JSON log still gets its error line.
        svc.log.error(rid, "request", f"internal error: {type(exc).__name__}: {exc}", exc, status=500,
                      method=request.method, path=request.path)
        raise


def svc_problem(svc: Service, request: web.Request, p: Problem) -> web.Response:
    rid = request["rid"]
    status = svc.settings.errors[p.code]["status"]
    svc.log.error(rid, p.stage, p.detail, p.cause or p, code=p.code, status=status,
                  method=request.method, path=request.path)
    resp = problem_response(svc.settings.errors, p, rid)
    if p.code == "upload_timeout":
        resp.force_close()  # the rest of the body is not worth waiting for
    elif p.code == "upgrade_required" and "upgrade" in request.headers.get("Connection", "").lower():
        # aiohttp ends a connection that asked to upgrade; say so, or the client reuses it.
        resp.force_close()
    return resp


async def _add_request_id(request: web.Request, response: web.StreamResponse) -> None:
    rid = request.get("rid")
    if rid is None:
        rid = request["rid"] = request.app["svc"].ids.pick(request.headers.get("X-Request-Id"))
    response.headers["X-Request-Id"] = rid


async def digitize(request: web.Request) -> web.Response:
    return await request.app["svc"].pipeline_request(request, "digitize")


async def export(request: web.Request) -> web.Response:
    return await request.app["svc"].pipeline_request(request, "export")


async def contract(request: web.Request) -> web.Response:
    return web.Response(text=json.dumps(request.app["svc"].settings.doc), content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    svc: Service = request.app["svc"]
    text = render_metrics(svc.pools, svc.temp_files(), svc.settings.metrics)
    return web.Response(text=text, content_type="text/plain", headers={"X-Content-Type-Options": "nosniff"})


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n", content_type="text/plain")


def make_app(svc: Service) -> web.Application:
    api = svc.settings.api
    app = web.Application(middlewares=[request_ids_and_problems])
    app["svc"] = svc
    app.router.add_post(api["digitize"]["path"], digitize)
    app.router.add_post(api["export"]["path"], export)
    app.router.add_get(api["relay"]["path"], relay.handler)
    app.router.add_get(api["contract"]["path"], contract)
    app.router.add_get(api["metrics"]["path"], metrics)
    app.router.add_get(api["healthz"]["path"], healthz)
    app.on_response_prepare.append(_add_request_id)
    app.on_startup.append(relay.start_client)
    app.on_cleanup.append(relay.stop_client)
    return app
