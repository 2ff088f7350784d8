"""The contract as this service sees it: `spec/contract.toml` read at start-up, plus the
environment overrides the contract itself lists (each pool's, section's and clause's
`overrides`, contract language 2).

Nothing below repeats a value of the contract: every limit, status, code and title is looked up
in the parsed TOML, so the service and the checker share one source of truth.
"""

from __future__ import annotations

import copy
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

# The contract lives two folders up in this repository; a service copied elsewhere sets
# PLIMSOLL_CONTRACT to its own copy of contract.toml.
DEFAULT_CONTRACT = Path(__file__).resolve().parents[3] / "spec" / "contract.toml"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

MB = 1024 * 1024  # the contract's MB (B5's upload budget, as B2's memory cap in jobs.py)


class ContractError(Exception):
    """The contract or an override is unusable: the service refuses to start."""


def _parse_override(env: str, raw: str, current):
    raw = raw.strip()
    if isinstance(current, bool):
        low = raw.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ContractError(f"{env}={raw!r}: expected 1/0 or true/false")
    if isinstance(current, int):
        if not raw.isdigit():
            raise ContractError(f"{env}={raw!r}: expected a non-negative integer")
        return int(raw)
    if isinstance(current, float):
        try:
            value = float(raw)
        except ValueError:
            raise ContractError(f"{env}={raw!r}: expected a number") from None
        if not math.isfinite(value):
            raise ContractError(f"{env}={raw!r}: expected a finite number")
        return value
    return raw


def contract_path(environ) -> Path:
    return Path(environ.get("PLIMSOLL_CONTRACT") or DEFAULT_CONTRACT)


def _override_sites(doc: dict):
    """Every override of a language-2 contract: (owner table, its dotted path, the override).
    The pools', the sections' (`[connections]`, `[upload]`) and the clauses' own, as
    plimsoll-spec's `override_sites` lists them."""
    for name, pool in doc["pools"].items():
        for ov in pool.get("overrides", []):
            yield pool, f"pools.{name}", ov
    for section in ("connections", "upload"):
        for ov in doc[section].get("overrides", []):
            yield doc[section], section, ov
    for clause_id, clause in doc["clauses"].items():
        for ov in clause.get("overrides", []):
            yield clause["value"], f"clauses.{clause_id}.value", ov


def _flat_values(doc: dict) -> dict:
    """The values this service reads, by the short names it uses: the clauses' own values and
    each pool's, section's and refusal hint's, read where language 2 keeps them."""
    values = {}
    for clause in doc["clauses"].values():
        values.update(clause["value"])
    pools = doc["pools"]
    for name in ("digitize", "export"):
        pool = pools[name]
        values[f"{name}_workers"] = pool["workers"]
        values[f"{name}_queue_capacity"] = pool["queue"]["capacity"]
        values[f"{name}_timeout_ms"] = pool["deadline_ms"]
    digitize = pools["digitize"]
    values["memory_cap_mb"] = digitize["memory_cap_mb"]
    values.update(digitize["cancellation"])
    values["relay_concurrency"] = pools["relay"]["workers"]
    values["relay_queue_capacity"] = pools["relay"]["queue"]["capacity"]
    hint = doc["refusals"][digitize["refusal"]]["hint"]
    for key in ("window_samples", "min_seconds", "empty_window_seconds"):
        values[key] = hint[key]
    values["retry_after_header"] = hint["header"]
    values["head_timeout_ms"] = doc["connections"]["head_timeout_ms"]
    values["max_connections"] = doc["connections"]["max_connections"]
    values["upload_read_timeout_ms"] = doc["upload"]["read_timeout_ms"]
    values["upload_budget_mb"] = doc["upload"]["budget_mb"]
    return values


def load_contract(environ=None) -> tuple[dict, dict, list]:
    """Returns (effective contract document, {name: value} of what this service reads, the
    overrides applied as (dotted path, env, old, new))."""
    environ = os.environ if environ is None else environ
    path = contract_path(environ)
    try:
        with path.open("rb") as fh:
            raw = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ContractError(f"cannot read the contract {path}: {exc}") from exc
    if raw.get("language") != 2:
        raise ContractError(
            f"{path}: written in contract language {raw.get('language', 1)}; this service reads language 2 "
            f"(`plimsoll contract upgrade {path}` rewrites a language-1 document)"
        )

    doc = copy.deepcopy(raw)
    applied = []
    for table, owner, ov in _override_sites(doc):
        env, fld = ov["env"], ov["field"]
        if env not in environ:
            continue
        *parents, leaf = fld.split(".")
        for part in parents:
            table = table[part]
        old = table[leaf]
        new = _parse_override(env, environ[env], old)
        table[leaf] = new
        applied.append((f"{owner}.{fld}", env, old, new))
    # The schema marks `retry_after` required on every error (default false in the TOML).
    for err in doc["errors"]:
        err.setdefault("retry_after", False)
    return doc, _flat_values(doc), applied


@dataclass(frozen=True)
class DesignLimits:
    """Limits of the design JSON. They are not in contract.toml but in the Design schema of the
    generated OpenAPI document (spec/openapi.json, beside the contract), read from there."""

    max_stitches: int = 10_000_000
    max_mm: float = 100_000.0
    max_coord: int = 1_000_000  # |x|, |y| of every needle position and extent, in 0.1 mm

    @classmethod
    def beside(cls, contract_path: Path) -> "DesignLimits":
        try:
            with (contract_path.parent / "openapi.json").open("rb") as fh:
                schemas = json.load(fh)["components"]["schemas"]
            design = schemas["Design"]["properties"]
            return cls(
                int(design["stitches"]["maxItems"]),
                float(design["width_mm"]["maximum"]),
                int(schemas["Stitch"]["properties"]["x"]["maximum"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return cls()


@dataclass(frozen=True)
class PoolSettings:
    name: str
    workers: int
    queue_capacity: int | None  # None: unbounded (the relay's overflow policy `queue`)
    timeout_ms: int | None


@dataclass
class Settings:
    doc: dict
    applied: list
    pools: dict[str, PoolSettings]
    upload_read_timeout_ms: int
    memory_cap_mb: int
    stop_within_ms: int
    checkpoint_interval_ms: int
    log_stack: bool
    window_samples: int
    min_seconds: int
    empty_window_seconds: int
    max_frame_body_bytes: int
    client_id_max_len: int
    client_id_extra_chars: str
    hooks_enabled: bool
    head_timeout_ms: int
    max_connections: int
    upload_budget_mb: int
    design: DesignLimits = field(default_factory=DesignLimits)
    errors: dict = field(default_factory=dict)

    @property
    def api(self) -> dict:
        return self.doc["api"]

    @property
    def stages(self) -> dict:
        """Each job pool's stages, in order (`pools.NAME.stages`)."""
        return {name: self.doc["pools"][name]["stages"] for name in ("digitize", "export")}

    @property
    def stage_names(self) -> list[str]:
        """Every stage a hook may name: the pipelines' stages, `queue`, and `relay` (the relay
        worker; a Stage of the problem schema, not listed in any pool's stages)."""
        st = self.stages
        return ["queue", *st["digitize"], *st["export"], "relay"]

    @property
    def hooks(self) -> dict:
        return self.doc["hooks"]

    @property
    def metrics(self) -> list:
        return self.doc["observability"]["metrics"]


def upload_budget_floor_bytes(api: dict, v: dict) -> int:
    """B5: the least upload budget, in bytes, the pools and limits need: every worker and queue
    place of both job pools holding a body at its endpoint's `max_upload_bytes`, plus one largest
    upload still being read. A smaller budget would refuse requests the pools could take."""
    held = sum(
        (v[f"{p}_workers"] + v[f"{p}_queue_capacity"]) * api[p]["max_upload_bytes"] for p in ("digitize", "export")
    )
    return held + max(api["digitize"]["max_upload_bytes"], api["export"]["max_upload_bytes"])


def settings_from_env(environ=None, relay_concurrency: int | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    doc, v, applied = load_contract(environ=environ)
    if relay_concurrency is not None:  # the --relay-concurrency flag beats RELAY_CONCURRENCY
        doc["pools"]["relay"]["workers"] = relay_concurrency
        v["relay_concurrency"] = relay_concurrency
        applied.append(("pools.relay.workers", "--relay-concurrency", None, relay_concurrency))
    for name in ("digitize_workers", "export_workers", "relay_concurrency"):
        if v[name] < 1:
            raise ContractError(f"{name} must be at least 1, got {v[name]}")
    for name in ("digitize_timeout_ms", "export_timeout_ms", "upload_read_timeout_ms", "head_timeout_ms"):
        if v[name] < 1:
            raise ContractError(f"{name} must be at least 1 ms, got {v[name]}")
    # B4: every request a pool holds sits on an open connection, so the cap must leave room for
    # all of them and one more (a /healthz probe, a /metrics scrape).
    held = sum(v[f"{p}_workers"] + v[f"{p}_queue_capacity"] for p in ("digitize", "export"))
    if v["max_connections"] <= held:
        raise ContractError(
            f"max_connections must exceed the requests the pools can hold (workers + queue of both "
            f"pools: {held}), got {v['max_connections']}"
        )
    # B5: the budget must cover what the pools can hold plus one upload being read, so only
    # uploads beyond what the pools could take anyway are ever refused by it.
    budget_mb = v["upload_budget_mb"]
    if not 1 <= budget_mb <= 1 << 24:
        raise ContractError(f"upload_budget_mb must be between 1 and {1 << 24} MB, got {budget_mb}")
    needed = upload_budget_floor_bytes(doc["api"], v)
    if budget_mb * MB < needed:
        raise ContractError(
            f"upload_budget_mb ({budget_mb} MB) is below the bodies the pools can hold (workers + queue "
            f"of both pools at their max_upload_bytes) plus one largest upload: {-(-needed // MB)} MB"
        )
    if v["relay_concurrency"] and v["relay_queue_capacity"] != "unbounded":
        raise ContractError("this service implements only an unbounded relay queue")
    for name in ("digitize", "export"):
        if not isinstance(v[f"{name}_queue_capacity"], int):
            raise ContractError(f"this service implements only a bounded {name} queue")
    pools = {
        "digitize": PoolSettings(
            "digitize", v["digitize_workers"], v["digitize_queue_capacity"], v["digitize_timeout_ms"]
        ),
        "export": PoolSettings(
            "export", v["export_workers"], v["export_queue_capacity"], v["export_timeout_ms"]
        ),
        "relay": PoolSettings("relay", v["relay_concurrency"], None, None),
    }
    hooks_env = doc["hooks"]["env"]
    return Settings(
        doc=doc,
        applied=applied,
        pools=pools,
        upload_read_timeout_ms=v["upload_read_timeout_ms"],
        memory_cap_mb=v["memory_cap_mb"],
        stop_within_ms=v["stop_within_ms"],
        checkpoint_interval_ms=v["checkpoint_interval_ms"],
        log_stack=bool(v["stack"]),
        window_samples=v["window_samples"],
        min_seconds=v["min_seconds"],
        empty_window_seconds=v["empty_window_seconds"],
        max_frame_body_bytes=v["max_frame_body_bytes"],
        client_id_max_len=v["client_id_max_len"],
        client_id_extra_chars=v["client_id_extra_chars"],
        hooks_enabled=environ.get(hooks_env, "") == "1",
        head_timeout_ms=v["head_timeout_ms"],
        max_connections=v["max_connections"],
        upload_budget_mb=budget_mb,
        design=DesignLimits.beside(contract_path(environ)),
        errors={e["code"]: e for e in doc["errors"]},
    )
