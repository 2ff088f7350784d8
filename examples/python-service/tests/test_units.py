"""Unit tests of the parts that are easy to get subtly wrong. The clauses themselves are tested
black-box by `plimsoll check` (see ../gate.sh).

    cd examples/python-service && python3 -m unittest discover -s tests
"""

import asyncio
import io
import json
import tempfile
import time
import unittest
import zlib

from PIL import Image

from plimsoll_service import admission, contract, export, jobs, pipeline, relay
from plimsoll_service.problems import Problem, RequestIds

STAGES = ["decode", "quantize", "segment", "fill", "sequence", "serialize"]
ALL_STAGES = ["queue", *STAGES, "parse", "encode", "write", "relay"]


class ContractTest(unittest.TestCase):
    def test_overrides_come_from_the_contract(self):
        s = contract.settings_from_env({"WORKER_POOL_SIZE": "3", "QUEUE_CAPACITY": "2", "LOG_STACK": "1"})
        self.assertEqual(s.pools["digitize"].workers, 3)
        self.assertEqual(s.pools["digitize"].queue_capacity, 2)
        self.assertTrue(s.log_stack)
        self.assertEqual(s.doc["pools"]["digitize"]["workers"], 3)
        self.assertFalse(s.hooks_enabled)

    def test_bad_override_stops_the_start(self):
        with self.assertRaises(contract.ContractError):
            contract.settings_from_env({"WORKER_POOL_SIZE": "four"})
        with self.assertRaises(contract.ContractError):
            contract.settings_from_env({"WORKER_POOL_SIZE": "0"})


class EstimatorTest(unittest.TestCase):
    def test_empty_window_then_median_rounded_up_and_clamped(self):
        e = admission.Estimator(window=4, min_seconds=1, empty_seconds=1, max_seconds=60)
        self.assertEqual(e.retry_after(), 1)
        for s in (0.0, 0.0, 0.2):
            e.add(s)
        self.assertEqual(e.retry_after(), 1)  # p50 0 -> at least 1
        for s in (2.5, 2.5, 2.5, 2.5):
            e.add(s)
        self.assertEqual(e.retry_after(), 3)  # the window holds the last 4 only
        e.add(500)
        e.add(500)
        e.add(500)
        self.assertEqual(e.retry_after(), 60)

    def test_refusal_sample_is_time_to_next_freed_slot(self):
        e = admission.Estimator(window=64, min_seconds=1, empty_seconds=1, max_seconds=60)
        e.refused(10.0)
        e.refused(10.5)
        e.slot_freed(12.2)
        self.assertEqual(sorted(round(x, 3) for x in e.samples), [1.7, 2.2])
        self.assertEqual(e.retry_after(), 2)


class PoolTest(unittest.TestCase):
    def test_fifo_and_refusal(self):
        async def scenario():
            ps = contract.PoolSettings("digitize", 1, 1, 2000)
            pool = admission.Pool(ps, 64, 1, 1)
            loop = asyncio.get_running_loop()
            await pool.acquire(loop.time(), None)
            order = []

            async def waiter(tag):
                await pool.acquire(loop.time(), loop.time() + 5)
                order.append(tag)
                pool.release()

            t = asyncio.create_task(waiter("a"))
            await asyncio.sleep(0)
            with self.assertRaises(admission.Overloaded):
                await pool.acquire(loop.time(), None)
            pool.release()
            await t
            self.assertEqual(order, ["a"])
            self.assertEqual(pool.busy, 0)
            self.assertEqual(pool.queue_depth, 0)

        asyncio.run(scenario())


class DecimalTest(unittest.TestCase):
    """Rule `query-parameters`' number grammar, which Python's float() is looser than."""

    def test_the_rules_numbers_and_nothing_else(self):
        from plimsoll_service.app import DECIMAL, WHITE_SPACE

        def number(text):
            return bool(DECIMAL.fullmatch(text.strip(WHITE_SPACE)))

        for good in ("6", "6.0", "6e0", " +6", "\u30006\t", "-5", "5.", ".5", "1e1", "1E-2", "1e400"):
            self.assertTrue(number(good), good)
        for bad in ("", ".", "inf", "nan", "0x10", "1_000", "1,5", "e5", "\u0666", "6\x1c"):
            self.assertFalse(number(bad), bad)


class HooksTest(unittest.TestCase):
    def test_grammar(self):
        h = jobs.parse_hooks("hold=fill:500;fail=decode; alloc=20", True, ALL_STAGES, "X-Plimsoll-Hook")
        self.assertEqual(h.at, {"fill": [("hold", 500)], "decode": [("fail", 0)]})
        self.assertEqual(h.alloc_mb, 20)
        # Blanks around tokens, empty directives, `+` and leading zeros, any stage name.
        h = jobs.parse_hooks(" hold = parse : +0010 ;; panic=relay ;", True, ALL_STAGES, "X-Plimsoll-Hook")
        self.assertEqual(h.at, {"parse": [("hold", 10)], "relay": [("panic", 0)]})
        self.assertEqual(jobs.parse_hooks("", True, ALL_STAGES, "X-Plimsoll-Hook"), jobs.Hooks())

    def test_malformed_and_disabled(self):
        for bad in ("hold=fill", "explode=fill", "hold=paint:10", "alloc=-1", "HOLD=fill:1", "hold=fill:1x"):
            with self.assertRaises(Problem, msg=bad) as ctx:
                jobs.parse_hooks(bad, True, ALL_STAGES, "X-Plimsoll-Hook")
            self.assertEqual(ctx.exception.code, "invalid_parameter")
        with self.assertRaises(Problem) as ctx:
            jobs.parse_hooks("hold=fill:1", False, ALL_STAGES, "X-Plimsoll-Hook")
        self.assertEqual(ctx.exception.code, "hooks_disabled")

    def test_hold_stops_at_the_deadline(self):
        job = jobs.Job("digitize", "t", STAGES, jobs.Hooks(at={"decode": [("hold", 5000)]}),
                       time.monotonic() + 0.05, 50, 1024, "/tmp")
        t = time.monotonic()
        with self.assertRaises(jobs.Stopped) as ctx:
            job.enter("decode")
        self.assertEqual(ctx.exception.reason, "timeout")
        self.assertLess(time.monotonic() - t, 0.5)


class PipelineTest(unittest.TestCase):
    def test_memory_cap_from_the_header_before_decoding(self):
        png = io.BytesIO()
        Image.new("RGB", (64, 64), "red").save(png, "PNG")
        data = bytearray(png.getvalue())
        data[16:24] = (100000).to_bytes(4, "big") + (100000).to_bytes(4, "big")  # IHDR width, height
        data[29:33] = zlib.crc32(bytes(data[12:29])).to_bytes(4, "big")  # the IHDR chunk's CRC
        job = jobs.Job("digitize", "t", STAGES, jobs.Hooks(), time.monotonic() + 5, 5000, 1024,
                       tempfile.gettempdir())
        try:
            with self.assertRaises(jobs.MemoryCapExceeded):
                pipeline.digitize(job, bytes(data), {}, 25_000_000, contract.DesignLimits())
        finally:
            job.cleanup()


class ExportTest(unittest.TestCase):
    def run_export(self, design):
        job = jobs.Job("export", "t", ["parse", "encode", "write"], jobs.Hooks(), time.monotonic() + 5,
                       5000, 1024, tempfile.gettempdir())
        try:
            return export.export(job, json.dumps(design).encode(), "dst", contract.DesignLimits())
        finally:
            job.cleanup()

    def design(self, **changes):
        d = {
            "format": "plimsoll-design/1", "width_mm": 10.0, "height_mm": 10.0,
            "threads": [{"color": "#ff0000"}],
            "extents": {"min_x": 0, "min_y": 0, "max_x": 300, "max_y": 300},
            "stitch_count": 2,
            "stitches": [{"x": 0, "y": 0, "cmd": "jump"}, {"x": 0, "y": 0, "cmd": "stitch"},
                         {"x": 300, "y": 300, "cmd": "stitch"}, {"x": 300, "y": 300, "cmd": "end"}],
        }
        d.update(changes)
        return d

    def test_long_moves_are_split_for_dst(self):
        data = self.run_export(self.design())
        self.assertEqual(data[512:515], bytes([0, 0, 0x83]))  # the jump to (0, 0): a zero move
        self.assertEqual(len(data), 512 + 3 * 6)  # jump, stitch, the 300-unit move as 3 stitches, end

    def test_cross_member_rules(self):
        d = self.design()
        cases = {
            "lies outside the extents": self.design(extents={"min_x": 0, "min_y": 0, "max_x": 100, "max_y": 300}),
            "stitch_count is": self.design(stitch_count=3),
            "stitched colour blocks but": self.design(threads=[]),
            "is not the last command": self.design(stitches=[d["stitches"][3], *d["stitches"][:3]]),
            "unknown variant `sew`": self.design(stitches=[{"x": 0, "y": 0, "cmd": "sew"}]),
        }
        for phrase, design in cases.items():
            with self.assertRaises(jobs.BadInput, msg=phrase) as ctx:
                self.run_export(design)
            self.assertEqual(ctx.exception.code, "malformed_design")
            self.assertIn(phrase, ctx.exception.detail)


class RelayTest(unittest.TestCase):
    def test_chunks_never_split_a_character(self):
        text = "é" * 10000
        chunks = relay.split_utf8(text, 16384)
        self.assertEqual("".join(chunks), text)
        self.assertTrue(all(len(c.encode()) <= 16384 for c in chunks))
        self.assertEqual(relay.split_utf8("", 16), [""])


class RequestIdTest(unittest.TestCase):
    def test_kept_or_replaced(self):
        ids = RequestIds(128, "._:-")
        self.assertEqual(ids.pick("abc.DEF:1-2_3".replace("_", "")), "abc.DEF:1-23")
        self.assertNotEqual(ids.pick("bad id"), "bad id")
        self.assertNotEqual(ids.pick("x" * 129), "x" * 129)
        self.assertEqual(len(ids.pick(None)), 26)


if __name__ == "__main__":
    unittest.main()
