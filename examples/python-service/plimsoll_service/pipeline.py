"""The digitize pipeline: image -> embroidery stitches, in the contract's stages
decode -> quantize -> segment -> fill -> sequence -> serialize.

Runs on a worker thread. Every stage calls `job.checkpoint()` between steps and inside its long
loops (B3), and charges its buffers to the request's memory budget before allocating them (B2).
Coordinates are in 0.1 mm, y grows downwards.
"""

from __future__ import annotations

import io
import json
import math
import os

import numpy as np
from PIL import Image, ImageFile

from .jobs import BadInput, Job

# We enforce our own limits (memory estimate, then pixel limit) from the header, before decoding.
Image.MAX_IMAGE_PIXELS = None

# Estimated bytes per pixel of the whole pipeline: Pillow's RGB image (4), the NumPy copy (3), the
# label map (1), and the quantizer's per-chunk temporaries (about 8, amortised): 16.
BYTES_PER_PIXEL = 16
FEED_CHUNK = 64 * 1024          # decode: bytes fed to the incremental decoder between checkpoints
ASSIGN_CHUNK = 65536            # quantize: pixels assigned between checkpoints
SAMPLE_PIXELS = 4096            # quantize: pixels the palette is fitted on
COLUMN_STEP_MM = 0.2            # segment: horizontal sampling of the colour map
SPECK_MM = 1.0                  # segment: runs shorter than this merge into their neighbour
NEAREST_LIMIT = 400             # sequence: nearest-neighbour ordering up to this many regions per colour
BYTES_PER_STITCH = 96           # fill..serialize: arrays plus the JSON text, per needle command
CMD_NAMES = ("stitch", "jump", "trim", "color_change", "end")
STITCH, JUMP, TRIM, COLOR_CHANGE, END = range(5)

_MAGIC = [
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"\x00\x00\x01\x00", "ICO"),
    (b"%PDF", "PDF"),
]


def sniff(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    for magic, name in _MAGIC:
        if data.startswith(magic):
            return name
    return None


def digitize(job: Job, data: bytes, params: dict, max_pixels: int, limits) -> bytes:
    job.make_tmpdir()
    ctx = {"data": data, "params": params, "max_pixels": max_pixels,
           "max_stitches": limits.max_stitches, "max_mm": limits.max_mm}
    steps = [
        ("decode", decode),
        ("quantize", quantize),
        ("segment", segment),
        ("fill", fill),
        ("sequence", sequence),
        ("serialize", serialize),
    ]
    return job.run_stages(steps, ctx)


# --- decode -----------------------------------------------------------------------------------


def decode(job: Job, ctx: dict) -> dict:
    data: bytes = ctx.pop("data")
    kind = sniff(data)
    if kind not in ("PNG", "JPEG"):
        # Magic bytes decide, not Content-Type: bytes that are no known image are unsupported too.
        raise BadInput("unsupported_format", f"expected PNG or JPEG, found {kind or 'data of no known image format'}")
    # Spool the upload into the request's temp dir (the partial state B1/B3/F1 must clean up).
    with open(os.path.join(job.tmpdir, "upload." + ("png" if kind == "PNG" else "jpg")), "wb") as fh:
        fh.write(data)
    try:
        with Image.open(io.BytesIO(data)) as head:  # reads the header only
            width, height = head.size
    except Exception as exc:  # noqa: BLE001 - any header failure is a malformed image
        raise BadInput("malformed_image", f"the {kind} header cannot be read: {exc}") from exc
    pixels = width * height
    if pixels == 0:
        raise BadInput("malformed_image", f"the {kind} image has no pixels ({width}x{height})")
    # B2 before decoding: a decompression bomb is refused from its header alone.
    job.charge(pixels * BYTES_PER_PIXEL + len(data), f"decoding {width}x{height} pixels")
    if pixels > ctx["max_pixels"]:
        raise BadInput(
            "payload_too_large",
            f"the image has {pixels} pixels ({width}x{height}), more than {ctx['max_pixels']}",
        )
    parser = ImageFile.Parser()
    try:
        for off in range(0, len(data), FEED_CHUNK):
            job.checkpoint()
            parser.feed(data[off : off + FEED_CHUNK])
        img = parser.close()
        job.checkpoint()
        img = img.convert("RGB")
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise BadInput("malformed_image", f"the {kind} data cannot be decoded: {exc}") from exc
    ctx["img"] = img
    return ctx


# --- quantize ---------------------------------------------------------------------------------


def quantize(job: Job, ctx: dict) -> dict:
    """K thread colours by k-means (fitted on a sample, then every pixel assigned in chunks)."""
    img = ctx.pop("img")
    colors = ctx["params"]["colors"]
    arr = np.asarray(img, dtype=np.uint8)
    del img
    h, w, _ = arr.shape
    flat = arr.reshape(-1, 3)
    n = flat.shape[0]
    rng = np.random.default_rng(0x5EED)
    sample = flat[rng.integers(0, n, size=min(n, SAMPLE_PIXELS))].astype(np.float32)
    k = min(colors, len(np.unique(sample, axis=0)))
    # k-means++ initialisation.
    centers = [sample[rng.integers(0, len(sample))]]
    for _ in range(1, k):
        job.checkpoint()
        d = np.min(((sample[:, None, :] - np.array(centers)[None]) ** 2).sum(-1), axis=1)
        if d.sum() == 0:
            break
        centers.append(sample[rng.choice(len(sample), p=d / d.sum())])
    centers = np.array(centers, dtype=np.float32)
    for _ in range(12):
        job.checkpoint()
        lab = ((sample[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1)
        moved = np.array([sample[lab == i].mean(0) if np.any(lab == i) else centers[i] for i in range(len(centers))])
        if np.allclose(moved, centers, atol=0.5):
            break
        centers = moved.astype(np.float32)
    labels = np.empty(n, dtype=np.uint8)
    for off in range(0, n, ASSIGN_CHUNK):
        job.checkpoint()
        chunk = flat[off : off + ASSIGN_CHUNK].astype(np.float32)
        labels[off : off + ASSIGN_CHUNK] = ((chunk[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1)
    ctx["labels"] = labels.reshape(h, w)
    ctx["palette"] = np.clip(np.rint(centers), 0, 255).astype(np.uint8)
    return ctx


# --- segment ----------------------------------------------------------------------------------


def segment(job: Job, ctx: dict) -> dict:
    """Regions per colour on the stitch grid: the colour map sampled along every fill row
    (density_mm apart) every 0.2 mm, specks merged, runs of one colour joined across rows."""
    labels = ctx.pop("labels")
    p = ctx["params"]
    h, w = labels.shape
    width_mm = p["width_mm"]
    px_per_mm = w / width_mm
    height_mm = h / px_per_mm
    if height_mm > ctx["max_mm"]:
        raise BadInput(
            "invalid_parameter",
            f"the design would be {height_mm:.0f} mm high, more than the limit of {ctx['max_mm']:g} mm: "
            "lower width_mm or use a less tall image",
        )
    density = p["density_mm"]
    n_rows, n_cols = int(height_mm / density) + 1, int(width_mm / COLUMN_STEP_MM) + 1
    job.charge((n_rows + n_cols) * 16 + n_cols * 8, f"sampling {n_rows} fill rows")
    row_mm = np.arange(density / 2, height_mm, density)
    col_mm = np.arange(COLUMN_STEP_MM / 2, width_mm, COLUMN_STEP_MM)
    yi = np.minimum((row_mm * px_per_mm).astype(np.int64), h - 1)
    xi = np.minimum((col_mm * px_per_mm).astype(np.int64), w - 1)
    min_cells = max(1, round(SPECK_MM / COLUMN_STEP_MM))
    rows: list[list[tuple[int, int, int]]] = []  # per row: (start cell, end cell exclusive, colour)
    for r in range(len(yi)):
        if r % 16 == 0:
            job.checkpoint()
        rows.append(_row_runs(labels[yi[r], xi], min_cells))
    # Union-find over runs: same colour, overlapping columns, adjacent rows.
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for r, runs in enumerate(rows):
        for i in range(len(runs)):
            parent[(r, i)] = (r, i)
    for r in range(1, len(rows)):
        if r % 16 == 0:
            job.checkpoint()
        above, here = rows[r - 1], rows[r]
        i = j = 0
        while i < len(above) and j < len(here):
            a0, a1, ac = above[i]
            b0, b1, bc = here[j]
            if a0 < b1 and b0 < a1 and ac == bc:
                ra, rb = find((r - 1, i)), find((r, j))
                if ra != rb:
                    parent[rb] = ra
            if a1 <= b1:
                i += 1
            else:
                j += 1
    regions: dict[tuple[int, int], dict] = {}
    for r, runs in enumerate(rows):
        for i, (c0, c1, colour) in enumerate(runs):
            reg = regions.setdefault(find((r, i)), {"colour": colour, "runs": []})
            reg["runs"].append((r, c0, c1))
    ctx["regions"] = list(regions.values())
    ctx["row_mm"] = row_mm
    ctx["height_mm"] = height_mm
    return ctx


def _row_runs(row: np.ndarray, min_cells: int) -> list[tuple[int, int, int]]:
    cuts = np.flatnonzero(row[1:] != row[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(row)]))
    runs = [[int(s), int(e), int(row[s])] for s, e in zip(starts, ends)]
    # Specks: a run shorter than min_cells takes the colour of its longer neighbour.
    if len(runs) > 1:
        for k, run in enumerate(runs):
            if run[1] - run[0] < min_cells:
                left = runs[k - 1] if k > 0 else None
                right = runs[k + 1] if k + 1 < len(runs) else None
                best = max((x for x in (left, right) if x), key=lambda x: x[1] - x[0])
                run[2] = best[2]
    merged: list[tuple[int, int, int]] = []
    for s, e, c in runs:
        if merged and merged[-1][2] == c:
            merged[-1] = (merged[-1][0], e, c)
        else:
            merged.append((s, e, c))
    return merged


# --- fill -------------------------------------------------------------------------------------


def fill(job: Job, ctx: dict) -> dict:
    """Tatami fill: each run stitched along its row in stitches of at most max_stitch_mm, rows
    alternating direction, penetrations staggered by a third of a stitch from row to row."""
    p = ctx["params"]
    step = p["max_stitch_mm"] * 10.0  # in 0.1 mm
    cell = COLUMN_STEP_MM * 10.0
    row_y = np.rint(ctx["row_mm"] * 10.0).astype(np.int64)
    regions = ctx.pop("regions")
    estimate = int(sum((c1 - c0) * cell / step + 3 for reg in regions for _, c0, c1 in reg["runs"]))
    if estimate > ctx["max_stitches"]:
        raise BadInput(
            "invalid_parameter",
            f"the design would have about {estimate} stitches, more than the limit of {ctx['max_stitches']}: "
            "lower width_mm or raise density_mm or max_stitch_mm",
        )
    job.charge(estimate * BYTES_PER_STITCH, f"filling about {estimate} stitches")
    blocks = []
    done = 0
    for reg in regions:
        runs = sorted(reg["runs"])
        xs_parts, ys_parts, cmd_parts = [], [], []
        prev = None
        for k, (r, c0, c1) in enumerate(runs):
            done += 1
            if done % 64 == 0:
                job.checkpoint()
            a, b = c0 * cell, c1 * cell
            offset = (r % 3) * step / 3.0
            first = math.ceil((a - offset) / step) * step + offset
            inner = np.arange(first, b, step)
            inner = inner[(inner > a + 1) & (inner < b - 1)]
            xs = np.rint(np.concatenate(([a], inner, [b]))).astype(np.int64)
            if k % 2 == 1:
                xs = xs[::-1]
            y = row_y[r]
            cmds = np.full(len(xs), STITCH, dtype=np.int8)
            if prev is not None and math.hypot(xs[0] - prev[0], y - prev[1]) > step:
                cmds[0] = JUMP  # too far to travel with the needle down
            xs_parts.append(xs)
            ys_parts.append(np.full(len(xs), y, dtype=np.int64))
            cmd_parts.append(cmds)
            prev = (xs[-1], y)
        blocks.append(
            {
                "colour": reg["colour"],
                "x": np.concatenate(xs_parts),
                "y": np.concatenate(ys_parts),
                "cmd": np.concatenate(cmd_parts),
            }
        )
    ctx["blocks"] = blocks
    return ctx


# --- sequence ---------------------------------------------------------------------------------


def sequence(job: Job, ctx: dict) -> dict:
    """Colour blocks (lightest thread first), regions of a colour nearest-first, jumps between
    regions (with a trim when far), trim + colour change between colours, end."""
    palette = ctx["palette"]
    step = ctx["params"]["max_stitch_mm"] * 10.0
    blocks = ctx.pop("blocks")
    by_colour: dict[int, list[dict]] = {}
    for blk in blocks:
        by_colour.setdefault(blk["colour"], []).append(blk)
    luminance = lambda c: 0.2126 * palette[c][0] + 0.7152 * palette[c][1] + 0.0722 * palette[c][2]
    colour_order = sorted(by_colour, key=luminance, reverse=True)
    xs, ys, cmds, threads = [], [], [], []
    pos = (0, 0)

    def emit(x, y, c):
        xs.append(np.asarray([x], dtype=np.int64))
        ys.append(np.asarray([y], dtype=np.int64))
        cmds.append(np.asarray([c], dtype=np.int8))

    for ci, colour in enumerate(colour_order):
        if ci > 0:
            emit(pos[0], pos[1], TRIM)
            emit(pos[0], pos[1], COLOR_CHANGE)
        threads.append({"color": "#%02x%02x%02x" % tuple(int(v) for v in palette[colour])})
        todo = by_colour[colour]
        first_in_colour = True
        nearest = len(todo) <= NEAREST_LIMIT
        if not nearest:  # too many to compare each time: top to bottom
            todo.sort(key=lambda b: (b["y"][0], b["x"][0]), reverse=True)
        while todo:
            job.checkpoint()
            if nearest:  # the nearest region next (by its first needle position)
                best = min(range(len(todo)), key=lambda i: (todo[i]["x"][0] - pos[0]) ** 2 + (todo[i]["y"][0] - pos[1]) ** 2)
            else:
                best = len(todo) - 1
            blk = todo.pop(best)
            start = (int(blk["x"][0]), int(blk["y"][0]))
            dist = math.hypot(start[0] - pos[0], start[1] - pos[1])
            if not first_in_colour and dist > 5 * step:
                emit(pos[0], pos[1], TRIM)
            if first_in_colour or dist > step:
                emit(start[0], start[1], JUMP)
            first_in_colour = False
            xs.append(blk["x"])
            ys.append(blk["y"])
            cmds.append(blk["cmd"])
            pos = (int(blk["x"][-1]), int(blk["y"][-1]))
    emit(pos[0], pos[1], TRIM)
    emit(pos[0], pos[1], END)
    ctx["x"] = np.concatenate(xs)
    ctx["y"] = np.concatenate(ys)
    ctx["cmd"] = np.concatenate(cmds)
    ctx["threads"] = threads
    return ctx


# --- serialize --------------------------------------------------------------------------------


def serialize(job: Job, ctx: dict) -> bytes:
    """The design JSON of the contract's `Design` schema (`plimsoll-design/1`)."""
    x, y, cmd = ctx["x"], ctx["y"], ctx["cmd"]
    p = ctx["params"]
    head = {
        "format": "plimsoll-design/1",
        "width_mm": p["width_mm"],
        "height_mm": round(float(ctx["height_mm"]), 3),
        "threads": ctx["threads"],
        "extents": {
            "min_x": int(x.min()),
            "min_y": int(y.min()),
            "max_x": int(x.max()),
            "max_y": int(y.max()),
        },
        "stitch_count": int(np.count_nonzero(cmd == STITCH)),
    }
    parts = [json.dumps(head)[:-1], ',"stitches":[']
    xl, yl, cl = x.tolist(), y.tolist(), cmd.tolist()
    chunk = 8192
    for off in range(0, len(xl), chunk):
        job.checkpoint()
        body = ",".join(
            f'{{"x":{a},"y":{b},"cmd":"{CMD_NAMES[c]}"}}'
            for a, b, c in zip(xl[off : off + chunk], yl[off : off + chunk], cl[off : off + chunk])
        )
        parts.append(body if off == 0 else "," + body)
    parts.append("]}")
    return "".join(parts).encode()
