"""plimsoll_asgi: the Plimsoll test hook "in a line" for ASGI services (Starlette, FastAPI, …).

    app = PlimsollHold(app)          # inside the app's concurrency limit

The Plimsoll checker keeps one of a pool's workers busy on purpose by sending the contract's hook
header (`X-Plimsoll-Hook: hold=STAGE:MS`); this middleware waits that long before the app runs.
See README.md for where it goes relative to the limit.
"""

from .hooks import Directive, HookError, parse_hooks
from .middleware import PlimsollHold, enabled_from_env

__all__ = ["Directive", "HookError", "PlimsollHold", "enabled_from_env", "parse_hooks"]
