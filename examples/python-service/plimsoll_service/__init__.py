"""A second implementation of the Plimsoll digitize-service contract, in Python (aiohttp).

Written from `docs/concurrency.md`, `spec/contract.toml` and `spec/openapi.json` only; gated by the
same `plimsoll check` as the Rust reference server.
"""
