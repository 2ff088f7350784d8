"""The export pipeline: design JSON -> machine file, in the contract's stages parse -> encode -> write.

DST and EXP are written by pyembroidery's writers; moves longer than the format allows (DST 121,
EXP 127 units of 0.1 mm) are split here, in `encode`, with checkpoints, so the writer gets moves it
can encode as they are. SVG is a preview written here.
"""

from __future__ import annotations

import json
import math
import os
import re

from pyembroidery import COLOR_CHANGE, END, JUMP, STITCH, TRIM, DstWriter, EmbPattern, EmbThread, ExpWriter

from .jobs import BadInput, Job

CMDS = {"stitch": STITCH, "jump": JUMP, "trim": TRIM, "color_change": COLOR_CHANGE, "end": END}
WRITERS = {"dst": DstWriter, "exp": ExpWriter}
CONTENT_TYPES = {"dst": "application/octet-stream", "exp": "application/octet-stream", "svg": "image/svg+xml"}
PARSE_BYTES_PER_BODY_BYTE = 8   # Python objects of parsed JSON, per byte of JSON text
PATTERN_BYTES_PER_STITCH = 160  # pyembroidery keeps each needle command as a Python list
CHECK_EVERY = 4096
COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")


def export(job: Job, body: bytes, fmt: str, limits) -> bytes:
    job.make_tmpdir()
    ctx = {"body": body, "format": fmt, "limits": limits}
    steps = [("parse", parse), ("encode", encode), ("write", write)]
    return job.run_stages(steps, ctx)


def _bad(path: str, what: str) -> BadInput:
    return BadInput("malformed_design", f"{path}: {what}")


def _number(doc: dict, key: str, hi: float) -> float:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= hi:
        raise _bad(key, f"expected a number from 0 to {hi:g}")
    return float(v)


def _int(v, path: str, lo: int, hi: int) -> int:
    """JSON Schema's integer: a number without a fractional part (300 or 300.0)."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _bad(path, f"expected an integer from {lo} to {hi}")
    return v


def parse(job: Job, ctx: dict) -> dict:
    body: bytes = ctx.pop("body")
    # Spool the upload (the partial state B1/B3/F1 must clean up).
    with open(os.path.join(job.tmpdir, "design.json"), "wb") as fh:
        fh.write(body)
    job.charge(len(body) * PARSE_BYTES_PER_BODY_BYTE, "parsing the design")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput("malformed_design", f"not JSON: {exc}") from exc
    job.checkpoint()
    if not isinstance(doc, dict):
        raise _bad("$", "expected an object")
    for key in ("format", "width_mm", "height_mm", "threads", "extents", "stitch_count", "stitches"):
        if key not in doc:
            raise _bad(key, "missing")
    if doc["format"] != "plimsoll-design/1":
        raise _bad("format", f"expected `plimsoll-design/1`, got {doc['format']!r}")
    limits = ctx.pop("limits")
    _number(doc, "width_mm", limits.max_mm)
    _number(doc, "height_mm", limits.max_mm)
    stitch_count = _int(doc["stitch_count"], "stitch_count", 0, limits.max_stitches)
    coord = (-limits.max_coord, limits.max_coord)
    extents = doc["extents"]
    if not isinstance(extents, dict):
        raise _bad("extents", "expected an object")
    for key in ("min_x", "min_y", "max_x", "max_y"):
        _int(extents.get(key), f"extents.{key}", *coord)
    threads = doc["threads"]
    if not isinstance(threads, list):
        raise _bad("threads", "expected an array")
    colors = []
    for i, t in enumerate(threads):
        if not isinstance(t, dict) or not isinstance(t.get("color"), str) or not COLOR.match(t["color"]):
            raise _bad(f"threads[{i}].color", "expected `#rrggbb`")
        colors.append(t["color"])
    stitches = doc["stitches"]
    if not isinstance(stitches, list):
        raise _bad("stitches", "expected an array")
    if len(stitches) > limits.max_stitches:
        raise _bad("stitches", f"{len(stitches)} commands, more than the limit of {limits.max_stitches}")
    x0, y0, x1, y1 = (extents[k] for k in ("min_x", "min_y", "max_x", "max_y"))
    program = []
    stitched_blocks = block = n_stitches = 0
    for i, s in enumerate(stitches):
        if i % CHECK_EVERY == 0:
            job.checkpoint()
        if not isinstance(s, dict):
            raise _bad(f"stitches[{i}]", "expected an object")
        cmd = s.get("cmd")
        if not isinstance(cmd, str) or cmd not in CMDS:
            raise _bad(f"stitches[{i}].cmd", f"unknown variant `{cmd}`" if isinstance(cmd, str) else "missing")
        x, y = _int(s.get("x"), f"stitches[{i}].x", *coord), _int(s.get("y"), f"stitches[{i}].y", *coord)
        # The cross-member rules the Design schema's description states:
        if not (x0 <= x <= x1 and y0 <= y <= y1):
            raise _bad(f"stitches[{i}]", f"({x}, {y}) lies outside the extents")
        if cmd == "end" and i != len(stitches) - 1:
            raise _bad(f"stitches[{i}].cmd", "`end` is not the last command")
        if cmd == "stitch":
            n_stitches += 1
            stitched_blocks = block + 1
        elif cmd == "color_change":
            block += 1
        program.append((x, y, cmd))
    if stitch_count != n_stitches:
        raise _bad("stitch_count", f"stitch_count is {stitch_count} but there are {n_stitches} stitch commands")
    if stitched_blocks > len(colors):
        raise _bad("threads", f"{stitched_blocks} stitched colour blocks but {len(colors)} threads")
    ctx["program"] = program
    ctx["colors"] = colors
    ctx["extents"] = extents
    return ctx


def encode(job: Job, ctx: dict) -> dict:
    program = ctx.pop("program")
    if ctx["format"] == "svg":
        ctx["polylines"] = _polylines(job, program, ctx["colors"])
        return ctx
    writer = WRITERS[ctx["format"]]
    limit = min(writer.MAX_STITCH_DISTANCE, writer.MAX_JUMP_DISTANCE)
    job.charge(len(program) * PATTERN_BYTES_PER_STITCH, "encoding the stitches")
    pattern = _Pattern()
    for color in ctx["colors"]:
        pattern.add_thread(EmbThread(color))
    out = pattern.stitches
    px = py = 0
    ended = False
    for i, (x, y, cmd) in enumerate(program):
        if i % CHECK_EVERY == 0:
            job.checkpoint()
        code = CMDS[cmd]
        if code in (STITCH, JUMP):
            dx, dy = x - px, y - py
            n = max(1, math.ceil(max(abs(dx), abs(dy)) / limit))
            if n > 1:
                job.charge((n - 1) * PATTERN_BYTES_PER_STITCH, "splitting long moves")
            for k in range(1, n + 1):
                out.append((px + round(dx * k / n), py + round(dy * k / n), code))
            px, py = x, y
            pattern.note(x, y, code)
        elif code == END:
            out.append((px, py, END))
            ended = True
            break
        else:
            out.append((px, py, code))
            pattern.note(px, py, code)
    if not ended:
        out.append((px, py, END))
    ctx["pattern"] = pattern
    return ctx


class _Pattern(EmbPattern):
    """An EmbPattern that keeps the DST header's figures (bounds, colour changes) as it is built,
    so the writer does not walk every stitch once more before its first (checkpointed) write."""

    def __init__(self):
        super().__init__()
        self._bounds = None
        self._changes = 0

    def note(self, x: int, y: int, code: int) -> None:
        b = self._bounds
        if b is None:
            self._bounds = [x, y, x, y]
        else:
            b[0], b[1], b[2], b[3] = min(b[0], x), min(b[1], y), max(b[2], x), max(b[3], y)
        if code == COLOR_CHANGE:
            self._changes += 1

    def bounds(self):
        return tuple(self._bounds) if self._bounds else (0, 0, 0, 0)

    def count_color_changes(self):
        return self._changes


def _polylines(job: Job, program, colors):
    """SVG preview: one polyline per stretch of needle-down stitches, coloured by thread."""
    lines, current, colour_index = [], [], 0
    px = py = 0

    def flush():
        if len(current) > 1:
            lines.append((colors[colour_index % len(colors)] if colors else "#000000", list(current)))
        current.clear()

    for i, (x, y, cmd) in enumerate(program):
        if i % CHECK_EVERY == 0:
            job.checkpoint()
        if cmd == "stitch":
            if not current:
                current.append((px, py))
            current.append((x, y))
        elif cmd == "color_change":
            flush()
            colour_index += 1
        else:
            flush()
        if cmd in ("stitch", "jump"):
            px, py = x, y
    flush()
    return lines


class _CheckpointedFile:
    """A file whose writes are checkpoints: the writer's own loop becomes cancellable."""

    def __init__(self, fh, job: Job):
        self._fh, self._job, self._n = fh, job, 0

    def write(self, data):
        self._n += 1
        if self._n % CHECK_EVERY == 0:
            self._job.checkpoint()
        return self._fh.write(data)

    def tell(self):
        return self._fh.tell()


def write(job: Job, ctx: dict) -> bytes:
    fmt = ctx["format"]
    path = os.path.join(job.tmpdir, f"design.{fmt}")
    if fmt == "svg":
        _write_svg(job, path, ctx["polylines"], ctx["extents"])
    else:
        with open(path, "wb") as fh:
            WRITERS[fmt].write(ctx.pop("pattern"), _CheckpointedFile(fh, job), None)
    job.checkpoint()
    with open(path, "rb") as fh:
        return fh.read()


def _write_svg(job: Job, path: str, polylines, extents) -> None:
    x0, y0 = extents["min_x"], extents["min_y"]
    w = max(1, extents["max_x"] - x0)
    h = max(1, extents["max_y"] - y0)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="{x0} {y0} {w} {h}" '
            f'width="{w / 10:g}mm" height="{h / 10:g}mm">\n'
        )
        for i, (colour, pts) in enumerate(polylines):
            if i % 256 == 0:
                job.checkpoint()
            points = " ".join(f"{x},{y}" for x, y in pts)
            fh.write(f'<polyline fill="none" stroke="{colour}" stroke-width="3" points="{points}"/>\n')
        fh.write("</svg>\n")
