"""The relay protocol's messages: parsing a `relay-http-request` envelope, building the
`relay-http-response` frames of a response whose body arrives piece by piece, and the one
`relay-error` frame that answers a message that is not an envelope.

The meaning matches the Rust reference (reference-server/src/relay/{envelope,frames}.rs) and the
Python service (examples/python-service/plimsoll_service/relay.py); the types are those of
spec/src/relay.rs. Nothing here does I/O, so all of it is unit-tested without a socket.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import re
from dataclasses import dataclass
from email.message import Message
from typing import Any

Frame = dict[str, Any]  # one message as JSON, the shape of spec/src/relay.rs's RelayResponse

RELAY_REQUEST = "relay-http-request"
RELAY_RESPONSE = "relay-http-response"
RELAY_ERROR = "relay-error"
TRANSFER_ENCODING = "content-transfer-encoding"

# spec/contract.toml, [clauses.R5] value.max_frame_body_bytes: the most bytes of body one frame's
# `body_chunk` carries.
MAX_FRAME_BODY_BYTES = 16384
# spec/contract.toml, [[errors]] code "invalid_parameter" (rule `relay-error`) and "stage_failed".
INVALID_PARAMETER = ("invalid_parameter", 400)
STAGE_FAILED = ("stage_failed", 503)

# From relay.py: what HTTP calls a token (method, header name), a field value, and an
# origin-form path; a path starting `//` is refused as the reference refuses it.
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_FIELD_VALUE = re.compile(r"^[\t\x20-\x7e\x80-\xff]*$")
_PATH = re.compile(r"^/(?!/)[\x21-\x7e]*$")
# Content types whose body is text; only these stream as text (see BodyEncoder). From relay.py.
TEXT_TYPES = re.compile(r"^(text/|application/([a-z0-9.+-]*\+)?json|image/svg\+xml|application/xml)")
# Not forwarded to the local handler (rule `relay-inner-request`, relay.py's NOT_FORWARDED): the
# envelope's own encoding and length, and what belongs to the connection urllib opens.
NOT_FORWARDED = {TRANSFER_ENCODING, "content-length", "host", "connection", "upgrade",
                 "transfer-encoding", "keep-alive", "te", "trailer"}
# Not copied from the local handler's answer into the first frame (relay.py's NOT_RETURNED).
NOT_RETURNED = {"connection", "content-length", "transfer-encoding", "keep-alive"}


class Malformed(Exception):
    """A message that is not a request envelope; answered with one `relay-error` frame."""

    def __init__(self, request_id: str, detail: str) -> None:
        super().__init__(detail)
        self.request_id = request_id
        self.detail = detail


@dataclass(frozen=True)
class Envelope:
    """A parsed `relay-http-request`: the inner request, ready to perform."""

    request_id: str
    method: str
    path: str
    headers: dict[str, str]  # what goes to the local handler (NOT_FORWARDED removed)
    body: bytes


def decode_base64(text: str) -> bytes:
    """Base64 read as leniently as the reference reads it: ASCII whitespace skipped, padding
    optional, stray trailing bits tolerated; anything else is an error (binascii.Error)."""
    compact = "".join(text.split())
    if len(compact) % 4 == 1:
        raise binascii.Error("a lone base64 digit at the end")
    return base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)


def parse_envelope(text: str) -> Envelope:
    """Validates one text message as rule `relay-error` lists; raises Malformed saying what is
    wrong, with the message's `request_id` when it had a string one."""
    try:
        env = json.loads(text)
    except ValueError as exc:
        raise Malformed("", f"the message is not JSON: {exc}") from None
    if not isinstance(env, dict):
        raise Malformed("", "the message is not a JSON object")
    rid = env.get("request_id")
    rid = rid if isinstance(rid, str) else ""
    if env.get("type") != RELAY_REQUEST:
        raise Malformed(rid, f"`type` must be `{RELAY_REQUEST}`, got {json.dumps(env.get('type'))}")
    if not rid:
        raise Malformed(rid, "`request_id` must be a non-empty string")
    method, path = env.get("method"), env.get("path")
    if not isinstance(method, str) or not _TOKEN.match(method):
        raise Malformed(rid, "`method` must be an HTTP method")
    if not isinstance(path, str) or not _PATH.match(path):
        raise Malformed(rid, "`path` must be a path and query starting with `/`, without blanks")
    headers, body = env.get("headers", {}), env.get("body", "")
    if not isinstance(headers, dict):
        raise Malformed(rid, "`headers` must be an object of strings")
    for name, value in headers.items():
        if not _TOKEN.match(name) or not isinstance(value, str) or not _FIELD_VALUE.match(value):
            raise Malformed(rid, f"header {name!r} is not a valid HTTP header")
    if not isinstance(body, str):
        raise Malformed(rid, "`body` must be a string")
    cte = next((v for k, v in headers.items() if k.lower() == TRANSFER_ENCODING), None)
    if cte is None:
        raw = body.encode()
    elif cte.strip().lower() != "base64":
        raise Malformed(rid, f"`{TRANSFER_ENCODING}` must be `base64` when present")
    else:
        try:
            raw = decode_base64(body)
        except ValueError as exc:  # binascii.Error is a ValueError
            raise Malformed(rid, f"`body` is not base64: {exc}") from None
    forwarded = {k: v for k, v in headers.items() if k.lower() not in NOT_FORWARDED}
    return Envelope(rid, method, path, forwarded, raw)


def error_frame(request_id: str, error: tuple[str, int], detail: str, seq: int = 0) -> Frame:
    """A `relay-error` frame: the contract error `code` with that code's status."""
    code, status = error
    return {"type": RELAY_ERROR, "request_id": request_id, "seq": seq, "status": status,
            "body_chunk": detail, "final": True, "code": code}


def response_headers(message: Message) -> dict[str, str]:
    """The first frame's headers: names lower-cased, repeated ones joined with ", " and values
    read as UTF-8 with replacement, as the reference does (http.client hands them over decoded
    as Latin-1)."""
    out: dict[str, str] = {}
    for name, value in message.items():
        name = name.lower()
        if name in NOT_RETURNED:
            continue
        value = value.encode("latin-1", "replace").decode("utf-8", "replace")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


class Reply:
    """The frames of one response in order: `seq` 0, 1, 2, ... without gaps, `status` on every
    frame, the headers on the first only."""

    def __init__(self, request_id: str, status: int, headers: dict[str, str]) -> None:
        self.request_id, self.status, self.headers = request_id, status, headers
        self.seq = 0

    def frame(self, body_chunk: str, final: bool) -> Frame:
        frame = {"type": RELAY_RESPONSE, "request_id": self.request_id, "seq": self.seq,
                 "status": self.status, "body_chunk": body_chunk, "final": final}
        if self.seq == 0 and self.headers:
            frame["headers"] = self.headers
        self.seq += 1
        return frame


def split_utf8(text: str, max_bytes: int) -> list[str]:
    """Pieces of at most max_bytes UTF-8 bytes, never splitting a character (relay.py's
    split_utf8, and the reference's split_text); none for an empty text."""
    data, chunks, start = text.encode(), [], 0
    while start < len(data):
        end = min(len(data), start + max_bytes)
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end -= 1
        chunks.append(data[start:end].decode())
        start = end
    return chunks


class NotUtf8(ValueError):
    """A body sent as text turned out not to be UTF-8 after its first frame had gone."""


class BodyEncoder:
    """Turns a body read piece by piece into `body_chunk` strings of at most max_bytes each.

    The reference looks at the whole body: UTF-8 travels as text, anything else as base64 (and
    the first frame says `content-transfer-encoding: base64`). A streaming bridge must choose
    with the first piece, before it has seen the rest: a body that is complete in its first piece
    is judged exactly as the reference judges it; a longer one travels as text only when its
    content type is textual and its first piece is UTF-8, otherwise as base64 (always correct).
    A text body that later turns out not to be UTF-8 raises `NotUtf8`: the first frame's header
    cannot be taken back, and replacing the bad bytes would lose data silently (the reference
    ends such a response with a `relay-error` too).

    Pieces never split a character (an incomplete one waits in the decoder for the next piece)
    nor a base64 quantum (bytes beyond a multiple of 3 wait for the next piece), so every chunk
    stands on its own and the chunks joined decode like the whole body encoded at once, with
    padding only at its very end.
    """

    def __init__(self, content_type: str, max_bytes: int = MAX_FRAME_BODY_BYTES) -> None:
        self.max_bytes = max(max_bytes, 4)  # a frame must hold any one character (reference)
        self.content_type = content_type.strip().lower()
        self.base64: bool | None = None  # decided by the first piece
        self._text = codecs.getincrementaldecoder("utf-8")("strict")
        self._carry = b""  # base64: bytes short of a whole quantum

    def room(self) -> int:
        """How many bytes the next read should ask for so its chunk fits one frame."""
        if self.base64 is False:
            return self.max_bytes - len(self._text.getstate()[0])
        return self.max_bytes // 4 * 3 - len(self._carry)

    def feed(self, piece: bytes, final: bool) -> list[str]:
        """The chunks `piece` completes (none when it completes nothing); after `final`, the
        body is done and nothing is left waiting."""
        if self.base64 is None:
            textual = final or bool(TEXT_TYPES.match(self.content_type))
            first = self._strict_text(piece, final) if textual else None
            self.base64 = first is None
            if first is not None:
                return split_utf8(first, self.max_bytes)
        if self.base64:
            data = self._carry + piece
            cut = len(data) if final else len(data) // 3 * 3
            self._carry = data[cut:]
            encoded = base64.b64encode(data[:cut]).decode("ascii")
            step = self.max_bytes // 4 * 4  # whole quanta per chunk
            return [encoded[i:i + step] for i in range(0, len(encoded), step)]
        try:
            text = self._text.decode(piece, final)
        except UnicodeDecodeError as exc:
            raise NotUtf8(f"the body of a textual content type is not UTF-8 after its first frame: {exc}") from exc
        return split_utf8(text, self.max_bytes)

    def _strict_text(self, piece: bytes, final: bool) -> str | None:
        """The first piece as text, or None when it is not UTF-8 (an incomplete last character
        is allowed, and waits in the decoder, unless the body ends here)."""
        try:
            return self._text.decode(piece, final)
        except UnicodeDecodeError:
            return None
