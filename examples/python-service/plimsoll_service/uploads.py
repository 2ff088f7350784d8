"""B5: the upload budget, the bytes of request bodies the server holds at once, all requests
together (being read, queued or running).

Bodies are read in full before admission (B1), so without this bound clients that each send a body
near its endpoint's limit and pause before its end would make the server hold one body per
connection. Everything here runs on the event loop thread, so a plain counter needs no lock.
"""

from __future__ import annotations


class UploadBudget:
    def __init__(self, limit_bytes: int):
        self.limit = limit_bytes
        self.held = 0  # bytes reserved by every live request together

    def share(self) -> "UploadShare":
        """An empty share for one request; the request gives it back with `release` when it ends."""
        return UploadShare(self)


class UploadShare:
    """One request's part of the budget. It only grows while the body is read (a declared length
    is reserved whole up front, a body without one is charged as its buffer grows) and is given
    back whole, once, when the request ends, whatever the path."""

    def __init__(self, budget: UploadBudget):
        self.budget = budget
        self.bytes = 0

    def reserve(self, size: int) -> bool:
        """Raises this share to `size` bytes (a smaller size is already covered). False, and the
        share left as it was, when the rest would take the budget past its limit."""
        extra = size - self.bytes
        if extra <= 0:
            return True
        if self.budget.held + extra > self.budget.limit:
            return False
        self.budget.held += extra
        self.bytes = size
        return True

    def release(self) -> None:
        """Gives the share back; a second call gives nothing (safe in every `finally`)."""
        self.budget.held -= self.bytes
        self.bytes = 0
