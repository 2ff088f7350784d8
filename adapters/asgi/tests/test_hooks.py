"""The Python grammar against the Rust one's own examples: every value here is copied from a test
of `plimsoll_spec::hooks` (spec/src/hooks.rs, `mod tests`) or from
spec/tests/openapi.rs::hook_pattern_accepts_what_the_parser_accepts (values the Rust parser and
the OpenAPI header pattern accept or refuse alike). The stage names are the contract's grammar's
STAGE rule, read from spec/contract.toml as the Rust test
`the_contracts_grammar_names_every_stage_and_no_other` reads it.

    cd adapters/asgi && python3 -m unittest discover -s tests
"""

import pathlib
import tomllib
import unittest

from plimsoll_asgi import Directive, HookError, parse_hooks

ROOT = pathlib.Path(__file__).resolve().parents[3]


def contract_stages() -> list[str]:
    grammar = tomllib.loads((ROOT / "spec" / "contract.toml").read_text())["hooks"]["grammar"]
    line = next(l for l in grammar.splitlines() if l.lstrip().startswith("STAGE"))
    return line.split('"')[1::2]


STAGES = contract_stages()

# spec/tests/openapi.rs: the first seven are accepted by both, the rest refused by both.
OPENAPI_ACCEPTED = [
    "hold=fill:500",
    "fail=segment;panic=decode;alloc=2048",
    "hold = fill : 5 ;\t; alloc=+007",
    "",
    " ; ",
    "hold=fill:1234567890123456789",
    "hold=fill:+0009999999999999999999",
]
OPENAPI_REFUSED = [
    "alloc=18446744073709551615",
    "alloc=10000000000000000000",
    "hold=fi ll:5",
    "ho ld=fill:5",
    "alloc=1\u000b",
    "alloc=\u00a01",
    "hold=fill",
    "hold=fill:",
    "fail=nowhere",
    "FAIL=decode",
    "alloc=-1",
    "alloc=1.5",
    "explode=now",
    "hold",
    "fail=decode,panic=fill",
    "hold=fill:500x",
    "fail==decode",
]


class GrammarTest(unittest.TestCase):
    def test_the_contract_names_the_stages(self):
        self.assertIn("queue", STAGES)
        self.assertIn("fill", STAGES)

    # spec/src/hooks.rs: round_trips_every_directive
    def test_round_trips_every_directive(self):
        text = "hold=fill:250;fail=segment;panic=decode;alloc=2048"
        parsed = parse_hooks(text, STAGES)
        self.assertEqual(
            parsed,
            [
                Directive("hold", "fill", 250),
                Directive("fail", "segment", 0),
                Directive("panic", "decode", 0),
                Directive("alloc", None, 2048),
            ],
        )
        self.assertEqual(";".join(map(str, parsed)), text)

    # spec/src/hooks.rs: refuses_bad_directives_with_the_offending_text
    def test_refuses_bad_directives_with_the_offending_text(self):
        for bad in ["hold=fill", "fail=nowhere", "alloc=-1", "explode=now", "hold", "alloc=10000000000000000000"]:
            with self.subTest(bad=bad):
                with self.assertRaises(HookError) as e:
                    parse_hooks(bad, STAGES)
                self.assertEqual(e.exception.directive, bad)

    # spec/src/hooks.rs: blanks_surround_tokens_and_nothing_else_outside_visible_ascii_passes
    def test_blanks_surround_tokens_and_nothing_else_outside_visible_ascii_passes(self):
        self.assertEqual(parse_hooks(" hold\t=fill: +0005 ;; ", STAGES), [Directive("hold", "fill", 5)])
        self.assertEqual(parse_hooks("alloc=9999999999999999999", STAGES), [Directive("alloc", None, 9999999999999999999)])
        for bad in ["hold=fill:5\u000b", "\u00a0alloc=1", "fail=d\u00e9code", "alloc=1\n"]:
            with self.subTest(bad=bad), self.assertRaises(HookError):
                parse_hooks(bad, STAGES)

    # spec/tests/openapi.rs: hook_pattern_accepts_what_the_parser_accepts
    def test_accepts_and_refuses_what_the_rust_parser_does(self):
        accepted = OPENAPI_ACCEPTED + [f"hold={s}:1;fail={s};panic={s}" for s in STAGES]
        for value in accepted:
            with self.subTest(value=value):
                parse_hooks(value, STAGES)
        for value in OPENAPI_REFUSED:
            with self.subTest(value=value), self.assertRaises(HookError):
                parse_hooks(value, STAGES)

    def test_without_stage_names_any_lowercase_stage_is_one(self):
        self.assertEqual(parse_hooks("hold=search:10", None), [Directive("hold", "search", 10)])
        with self.assertRaises(HookError):
            parse_hooks("hold=search:10", STAGES)
        # plimsoll_spec::StageName's bound: at most 64 bytes.
        self.assertEqual(parse_hooks(f"fail={'a' * 64}", None)[0].stage, "a" * 64)
        for bad in ["hold=Fill:1", "hold=:1", "fail=", "hold=a b:1", f"fail={'a' * 65}"]:
            with self.subTest(bad=bad), self.assertRaises(HookError):
                parse_hooks(bad, None)


if __name__ == "__main__":
    unittest.main()
