"""A relay bridge for seed 003's mesh node, in Python: a WebSocket client that dials its relay
and performs the relayed HTTP requests against the node's local handler, N at a time.

Run it with `python3 -m plimsoll_bridge --relay-url WS_URL --upstream URL`; see README.md.
"""

from .bridge import Bridge, Connection, Upstream, relay_concurrency
from .frames import BodyEncoder, Envelope, Malformed, parse_envelope

__all__ = ["BodyEncoder", "Bridge", "Connection", "Envelope", "Malformed", "Upstream",
           "parse_envelope", "relay_concurrency"]
