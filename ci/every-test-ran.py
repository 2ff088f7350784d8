#!/usr/bin/env python3
"""Every test the build holds ran and passed, and every declared broken variant was judged: read
from the test run's own record, not from the code that declares them.

    python3 ci/every-test-ran.py LIST.json JUNIT.xml...

LIST.json is `cargo nextest list --workspace --message-format json` of the build the runs used:
what the build holds. Each JUNIT.xml is one nextest run's record (`.ci/run` runs the `shared` and
`alone` profiles, `.config/nextest.toml`). Fails (exit 1, naming each) when:
  - a test the build holds is in no run's record, or did not pass there: a filter that leaves a
    test out of both halves, a test module compiled out (the server's `mutants_*` modules were,
    under `cargo nextest run -p plimsoll-server`, before its self dev-dependency), an ignored test;
  - a declared variant (one `mutants::caught::VARIANT` test per entry of the server's
    `mutants!` table) has no `variant VARIANT judged by ...` line in any passing test's output
    (`Mutant::report_judged`): a variant whose test passed without judging it (a variant seen only
    in bridge mode or under a fault returns at once there, and is judged by its bridge or fault
    row instead), or one no test judged at all.

Standard library only."""

import json
import re
import sys
import xml.etree.ElementTree as ET

MATRIX = "plimsoll::mutants"
CAUGHT = "caught::"
JUDGED = re.compile(r"^variant (\w+) judged by (.+)$", re.M)


def listed(path: str) -> set[tuple[str, str]]:
    """(binary id, test name) of every test the build holds."""
    suites = json.load(open(path))["rust-suites"]
    return {
        (binary, name)
        for binary, suite in suites.items()
        for name, case in suite["testcases"].items()
        if not case.get("ignored")
    }


def record(paths: list[str]) -> tuple[set[tuple[str, str]], dict[str, set[str]]]:
    """(binary id, test name) of every test that passed in the runs, and what judged each variant."""
    passed, judged = set(), {}
    for path in paths:
        for case in ET.parse(path).iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                continue
            if case.find("skipped") is not None:
                continue
            passed.add((case.get("classname"), case.get("name")))
            out = "".join(node.text or "" for node in case.iter("system-out"))
            for variant, by in JUDGED.findall(out):
                judged.setdefault(variant, set()).add(by)
    return passed, judged


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    held = listed(sys.argv[1])
    passed, judged = record(sys.argv[2:])
    problems = [f"{b} {n}: held by the build, but passed in no run" for b, n in sorted(held - passed)]
    declared = sorted(n[len(CAUGHT):] for b, n in held if b == MATRIX and n.startswith(CAUGHT))
    if not declared:
        problems.append(f"{MATRIX}: the build holds no {CAUGHT}* test: no variant is declared")
    problems += [f"variant {v}: declared, but no test's output says it was judged"
                 for v in declared if v not in judged]
    for problem in problems:
        print(f"every-test-ran: {problem}", file=sys.stderr)
    if problems:
        return 1
    rows = sum(len(by) for by in judged.values())
    print(f"every-test-ran: {len(held)} tests held, each passed; {len(declared)} declared variants, "
          f"each judged ({rows} rows: matrix, bridge and fault)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
