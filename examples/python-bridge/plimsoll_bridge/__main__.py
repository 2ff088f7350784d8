"""`python3 -m plimsoll_bridge --relay-url WS_URL --upstream URL [--relay-concurrency N]`

Dials the relay at WS_URL and performs its envelopes against the local HTTP handler at URL.
N: --relay-concurrency, else MESHNET_RELAY_CONCURRENCY, else RELAY_CONCURRENCY, else 8.
Logs one JSON object per line on standard error. SIGTERM or SIGINT: exit 0 within a second.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import urllib.parse

from .bridge import STOP_WITHIN_MS, Bridge, Upstream, relay_concurrency

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, message, and the record's `fields`."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry = {"ts": f"{ts}.{int(record.msecs):03d}Z", "level": record.levelname.lower(),
                 "msg": record.getMessage(), **getattr(record, "fields", {})}
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _url(value: str, schemes: tuple[str, ...]) -> str:
    """An argument checked at start-up: a wrong URL is exit 2 now, not a dial failing forever."""
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in schemes or not parts.netloc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a {' or '.join(schemes)} URL")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m plimsoll_bridge", description=__doc__.splitlines()[0])
    ap.add_argument("--relay-url", required=True, type=lambda v: _url(v, ("ws", "wss")),
                    help="the relay's WebSocket URL, e.g. ws://127.0.0.1:9100/relay")
    ap.add_argument("--upstream", required=True, type=lambda v: _url(v, ("http", "https")),
                    help="the local HTTP handler's base URL, e.g. http://127.0.0.1:8080")
    ap.add_argument("--relay-concurrency", type=int, default=None, metavar="N",
                    help="relay workers (beats MESHNET_RELAY_CONCURRENCY and RELAY_CONCURRENCY)")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = ap.parse_args(argv)

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    log = logging.getLogger("plimsoll_bridge")
    try:
        n = relay_concurrency(args.relay_concurrency, os.environ)
    except ValueError as exc:
        log.error("bad setting", extra={"fields": {"error": str(exc)}})
        return 2

    # The stop signals are taken synchronously by this thread (sigtimedwait below), never by an
    # asynchronous handler that could interrupt a thread holding a lock. Blocking them first makes
    # every thread started after this inherit the mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    bridge = Bridge(args.relay_url, Upstream(args.upstream), n)
    # Said before the dialler starts: its "relay connected" comes after, whatever the scheduler.
    log.info("bridge started", extra={"fields": {"relay": args.relay_url, "upstream": args.upstream,
                                                  "relay_concurrency": n}})
    runner = threading.Thread(target=bridge.run, name="relay-dialler", daemon=True)
    runner.start()
    code = 0
    while True:
        info = signal.sigtimedwait(STOP_SIGNALS, 0.5)
        if info is not None:
            log.info("stopping", extra={"fields": {"signal": signal.Signals(info.si_signo).name}})
            break
        if not runner.is_alive():  # run() only returns on stop; anything else is a crash
            log.error("the bridge's loop ended unexpectedly")
            code = 1
            break
    bridge.stop()
    runner.join(timeout=STOP_WITHIN_MS / 2000)  # a clean "disconnected" line if it comes soon
    log.info("stopped", extra={"fields": {"exit_code": code}})
    logging.shutdown()
    # Without waiting for stragglers: a worker may sit in urlopen for up to its 300 s timeout, and
    # ThreadPoolExecutor's threads are joined at interpreter exit (concurrent.futures registers
    # that hook), so a normal exit would wait for them. Logs are flushed above; nothing else is
    # left to flush or clean up (the bridge holds no files), so the process ends here.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
