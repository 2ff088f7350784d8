"""The test-hook grammar (`[hooks].grammar` of a Plimsoll contract), in Python.

The Rust workspace parses it once, in `plimsoll_spec::hooks::parse_hooks` (spec/src/hooks.rs);
this is the same language for Python services, tested against that parser's own accept and refuse
examples (tests/test_hooks.py names where each comes from):

    hooks     = OWS [ directive ] OWS *( ";" OWS [ directive ] OWS )
    directive = %s"hold" OWS "=" OWS STAGE OWS ":" OWS NUMBER
              / %s"fail" OWS "=" OWS STAGE
              / %s"panic" OWS "=" OWS STAGE
              / %s"alloc" OWS "=" OWS NUMBER
    NUMBER    = [ "+" ] *"0" 1*19DIGIT
    OWS       = *( SP / HTAB )

STAGE is one of the names the service's contract declares. A caller that passes none accepts any
name of lowercase letters, digits, `_` and `-` starting with a letter, at most 64 bytes (a contract's
`hold.hook.stage`; a service with no stages of its own holds "before the handler" whatever the
stage is called).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_OWS = " \t"
_B = r"[ \t]*"
# At most 19 significant digits after an optional `+` and any zeros: every number fits a u64.
_NUMBER = r"\+?0*([0-9]{1,19})"
# plimsoll_spec::StageName: at most 64 bytes.
_STAGE = r"([a-z][a-z0-9_-]{0,63})"
_HOLD = re.compile(rf"hold{_B}={_B}{_STAGE}{_B}:{_B}{_NUMBER}", re.ASCII)
_AT_STAGE = re.compile(rf"(fail|panic){_B}={_B}{_STAGE}", re.ASCII)
_ALLOC = re.compile(rf"alloc{_B}={_B}{_NUMBER}", re.ASCII)


@dataclass(frozen=True)
class Directive:
    """One directive: `kind` is hold, fail, panic or alloc; `stage` is None for alloc; `number`
    is the hold's milliseconds or alloc's megabytes (0 for fail and panic)."""

    kind: str
    stage: str | None
    number: int

    def __str__(self) -> str:
        """The directive in header syntax, as the Rust `format_hooks` writes it."""
        if self.kind == "hold":
            return f"hold={self.stage}:{self.number}"
        if self.kind == "alloc":
            return f"alloc={self.number}"
        return f"{self.kind}={self.stage}"


class HookError(ValueError):
    """A header the grammar refuses: `directive` quotes the offending directive (trimmed)."""

    def __init__(self, directive: str, reason: str):
        super().__init__(f"invalid hook directive `{directive}`: {reason}")
        self.directive = directive
        self.reason = reason


def _visible(c: str) -> bool:
    return "\x21" <= c <= "\x7e" or c in _OWS


def parse_hooks(value: str, stages: Iterable[str] | None = None) -> list[Directive]:
    """Every directive of a whole header value, in order; empty directives are none. Raises
    HookError naming the first directive the grammar refuses (a byte outside visible ASCII other
    than a blank refuses the whole value)."""
    known = None if stages is None else frozenset(stages)
    for c in value:
        if not _visible(c):
            raise HookError(value.strip(_OWS), f"{c!r} is outside visible ASCII (only blanks may surround the tokens)")
    out = []
    for raw in value.split(";"):
        d = raw.strip(_OWS)
        if d:
            out.append(_directive(d, known))
    return out


def _directive(d: str, known: frozenset[str] | None) -> Directive:
    def stage(name: str) -> str:
        if known is not None and name not in known:
            raise HookError(d, f"unknown stage `{name}`; expected one of {', '.join(sorted(known))}")
        return name

    if m := _HOLD.fullmatch(d):
        return Directive("hold", stage(m.group(1)), int(m.group(2)))
    if m := _AT_STAGE.fullmatch(d):
        return Directive(m.group(1), stage(m.group(2)), 0)
    if m := _ALLOC.fullmatch(d):
        return Directive("alloc", None, int(m.group(1)))
    if "=" not in d:
        raise HookError(d, "expected NAME=VALUE")
    name = d.split("=", 1)[0].strip(_OWS)
    if name not in ("hold", "fail", "panic", "alloc"):
        raise HookError(d, "unknown directive; expected hold, fail, panic or alloc")
    shape = {"hold": "hold=STAGE:MS", "fail": "fail=STAGE", "panic": "panic=STAGE", "alloc": "alloc=MB"}[name]
    raise HookError(d, f"expected {shape} (MS and MB: a non-negative integer of at most 19 digits)")
