"""Error bodies (RFC 9457 problem+json with the contract's members), request ids (F4) and the
structured JSON log (F3)."""

from __future__ import annotations

import json
import re
import secrets
import sys
import threading
import time
import traceback

from aiohttp import web

PROBLEM_TYPE = "application/problem+json"


class Problem(Exception):
    """An answer with one of the contract's error codes.

    `stage` is what the F3 log line says: the pipeline stage, `request` (refused before admission)
    or `admission` (refused by the pool). `failed_stage`/`completed_stages` go in the body when set.
    """

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        stage: str = "request",
        failed_stage: str | None = None,
        completed_stages: list[str] | None = None,
        retry_after: int | None = None,
        cause: BaseException | None = None,
        headers: dict | None = None,
    ):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.stage = stage
        self.failed_stage = failed_stage
        self.completed_stages = completed_stages
        self.retry_after = retry_after
        self.cause = cause
        self.headers = dict(headers or {})


# --- request ids ----------------------------------------------------------------------------

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_request_id() -> str:
    """A ULID: 48 bits of milliseconds and 80 random bits, Crockford base32 (26 characters)."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    out = []
    for _ in range(26):
        out.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(out))


class RequestIds:
    def __init__(self, max_len: int, extra_chars: str):
        self._ok = re.compile(r"^[A-Za-z0-9" + re.escape(extra_chars) + r"]{1,%d}$" % max_len)

    def pick(self, supplied: str | None) -> str:
        if supplied is not None and self._ok.match(supplied):
            return supplied
        return new_request_id()


# --- the JSON log -------------------------------------------------------------------------------


class JsonLog:
    """One JSON object per line, to PLIMSOLL_LOG_FILE (appended) or standard error."""

    def __init__(self, path: str | None, with_stack: bool):
        self.with_stack = with_stack
        self._lock = threading.Lock()
        self._fh = open(path, "a", encoding="utf-8", buffering=1) if path else sys.stderr

    def write(self, level: str, message: str, **fields) -> None:
        record = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
            "level": level,
            "message": message,
            **fields,
        }
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()

    def error(self, request_id: str, stage: str, error: str, cause: BaseException | None = None, **extra) -> None:
        """F3: one line per error, always with request_id, stage, error and stack."""
        stack = ""
        if self.with_stack:
            if cause is not None and cause.__traceback__ is not None:
                stack = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
            else:  # not raised: where it was reported from
                stack = "".join(traceback.format_stack(limit=12))
        self.write("error", error, request_id=request_id, stage=stage, error=error, stack=stack, **extra)

    def info(self, message: str, **fields) -> None:
        self.write("info", message, **fields)


# --- responses --------------------------------------------------------------------------------


def problem_body(errors: dict, problem: Problem, request_id: str) -> dict:
    spec = errors[problem.code]
    body = {
        "type": f"urn:plimsoll:error:{problem.code}",
        "title": spec["title"],
        "status": spec["status"],
        "detail": problem.detail,
        "error": problem.detail,
        "code": problem.code,
        "request_id": request_id,
    }
    if problem.failed_stage is not None:
        body["failed_stage"] = problem.failed_stage
        body["completed_stages"] = list(problem.completed_stages or [])
    return body


def problem_response(errors: dict, problem: Problem, request_id: str) -> web.Response:
    spec = errors[problem.code]
    hdrs = dict(problem.headers)
    if spec.get("retry_after") and problem.retry_after is not None:
        hdrs["Retry-After"] = str(int(problem.retry_after))
    return web.Response(
        status=spec["status"],
        body=json.dumps(problem_body(errors, problem, request_id)).encode(),
        content_type=PROBLEM_TYPE,
        headers=hdrs,
    )
