"""`python -m plimsoll_service [--port N] [--bind ADDR] [--relay-concurrency N]`

Settings come from the environment: the contract's overrides (WORKER_POOL_SIZE, QUEUE_CAPACITY,
DIGITIZE_TIMEOUT_MS, ... as listed in spec/contract.toml), PLIMSOLL_TEST_HOOKS=1,
PLIMSOLL_TEMP_DIR, PLIMSOLL_LOG_FILE, PLIMSOLL_DRAIN_TIMEOUT_MS and PLIMSOLL_CONTRACT.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile

from .app import Service, make_app
from .connections import BoundedServer
from .contract import ContractError, settings_from_env
from .problems import JsonLog


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m plimsoll_service", description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=None, help="port (default: the contract's api.default_port)")
    ap.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--relay-concurrency", type=int, default=None, help="relay workers (beats RELAY_CONCURRENCY)")
    args = ap.parse_args(argv)

    try:
        settings = settings_from_env(relay_concurrency=args.relay_concurrency)
    except ContractError as exc:
        print(f"plimsoll_service: {exc}", file=sys.stderr)
        return 2
    port = args.port if args.port is not None else settings.api["default_port"]
    temp_root = os.environ.get("PLIMSOLL_TEMP_DIR") or os.path.join(tempfile.gettempdir(), "plimsoll-python-service")
    os.makedirs(temp_root, exist_ok=True)
    log = JsonLog(os.environ.get("PLIMSOLL_LOG_FILE") or None, settings.log_stack)
    drain_ms = int(os.environ.get("PLIMSOLL_DRAIN_TIMEOUT_MS", "10000"))

    # Worker threads run Python between NumPy calls; a short GIL switch interval keeps the event
    # loop's refusals and scrapes prompt while every worker is busy (the default is 5 ms).
    sys.setswitchinterval(float(os.environ.get("PLIMSOLL_SWITCH_INTERVAL_MS", "1")) / 1000)
    svc = Service(settings, log, temp_root)
    host = "127.0.0.1" if args.bind in ("0.0.0.0", "::") else args.bind
    svc.self_url = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
    log.info(
        "listening",
        url=f"http://{args.bind}:{port}",
        temp_dir=temp_root,
        hooks=settings.hooks_enabled,
        overrides={path: new for path, _env, _old, new in settings.applied},
        pools={n: {"workers": p.workers, "queue": p.queue_capacity, "timeout_ms": p.timeout_ms}
               for n, p in settings.pools.items()},
        connections={"head_timeout_ms": settings.head_timeout_ms, "max": settings.max_connections},
        upload_budget_mb=settings.upload_budget_mb,
    )
    server = BoundedServer(
        make_app(svc),
        head_timeout_ms=settings.head_timeout_ms,  # B4
        max_connections=settings.max_connections,  # B4
        shutdown_timeout=drain_ms / 1000,
        handler_cancellation=True,  # B3: a client disconnect cancels its handler task
        access_log=None,
    )
    try:
        asyncio.run(serve(server, args.bind, port))
    finally:
        for ex in svc.executors.values():
            ex.shutdown(wait=False, cancel_futures=True)
    return 0


async def serve(server: BoundedServer, host: str, port: int) -> None:
    """Serves until SIGINT or SIGTERM, then drains (requests in flight get the drain timeout)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start(host, port)
        await stop.wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    sys.exit(main())
