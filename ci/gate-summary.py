#!/usr/bin/env python3
"""The gate's Markdown summary, from the JSON reports ci/gate.sh writes (REPORT_DIR/check.json,
REPORT_DIR/load-PROFILE.json): one table row per check of every step, with its verdict, and what
was observed and why for each check that did not pass. ci/action.sh appends it to
$GITHUB_STEP_SUMMARY, where GitHub shows it on the run's page.

    python3 ci/gate-summary.py REPORT_DIR "check burst overload" EXIT_CODE

Standard library only (it runs on a bare CI runner)."""

import html
import json
import sys
from pathlib import Path

# A cell longer than this is cut: GitHub keeps at most 1 MiB of a step's summary.
CELL = 400
ICON = {"pass": "✅ pass", "fail": "❌ fail", "skip": "⚪ skip", "not_applicable": "➖ not applicable",
        "waived": "🟡 waived"}


def cell(text: str) -> str:
    """Text safe inside one Markdown table cell: one line, no pipes, no markup."""
    text = " ".join(text.split())
    if len(text) > CELL:
        text = text[: CELL - 1] + "…"
    return html.escape(text, quote=False).replace("|", "\\|")


def step_report(report_dir: Path, step: str) -> tuple[str, Path]:
    name = "check" if step == "check" else f"load-{step}"
    return name, report_dir / f"{name}.json"


def why(result: dict) -> str:
    """What a reader needs for a check that did not pass."""
    verdict, observed = result.get("verdict"), result.get("observed", "")
    reason = result.get("reason") or ""
    if verdict == "fail":
        parts = [f"observed: {observed}" if observed else "", f"why: {reason}" if reason else ""]
        return "; ".join(p for p in parts if p)
    if verdict == "skip":
        return f"skipped: {reason}"
    if verdict == "waived":
        return f"waived: {reason}"
    if verdict == "not_applicable":
        return f"not applicable: {reason}"
    return ""


def render(report_dir: Path, steps: list[str], code: int) -> str:
    rows, notes, counts = [], [], {"pass": 0, "fail": 0, "skip": 0, "not_applicable": 0, "waived": 0}
    manifest = None
    for step in steps:
        name, path = step_report(report_dir, step)
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            rows.append(f"| {name} | — | — | ❌ did not run | {cell(f'no report ({e}); see the log')} |")
            counts["fail"] += 1
            continue
        manifest = manifest or report.get("manifest")
        if report.get("manifest", {}).get("incomplete"):
            notes.append(f"`{name}` is incomplete: {cell(report['manifest']['incomplete'])}")
        for r in report.get("results", []):
            verdict = r.get("verdict", "?")
            counts[verdict] = counts.get(verdict, 0) + 1
            rows.append(
                f"| {name} | `{cell(r.get('id', '?'))}` | {cell(r.get('title', ''))} "
                f"| {ICON.get(verdict, verdict)} | {cell(why(r))} |"
            )
    verdict = "pass" if code == 0 else "FAIL"
    out = [f"## Plimsoll gate: {verdict}", ""]
    if manifest:
        out.append(
            f"Target `{cell(manifest.get('target', '?'))}`, contract "
            f"{cell(manifest.get('contract_version', '?'))} ({cell(manifest.get('contract_hash', '?'))}), "
            f"strict {'on' if manifest.get('strict') else 'off'}."
        )
    out.append(
        f"{counts['pass']} passed"
        + (f", {counts['not_applicable']} not applicable" if counts["not_applicable"] else "")
        + f", {counts['fail']} failed, {counts['skip']} skipped"
        + (f", {counts['waived']} waived" if counts["waived"] else "")
        + f" (exit {code}). Reports (JUnit `*.junit.xml`, HTML `*.html`, JSON `*.json`): "
        f"`{cell(str(report_dir))}`."
    )
    out += [f"- {n}" for n in notes]
    out += ["", "| step | check | title | verdict | observed / why |", "|---|---|---|---|---|"]
    out += rows
    return "\n".join(out) + "\n"


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    report_dir, steps, code = Path(sys.argv[1]), sys.argv[2].split(), int(sys.argv[3])
    sys.stdout.write(render(report_dir, steps, code))
    return 0


if __name__ == "__main__":
    sys.exit(main())
