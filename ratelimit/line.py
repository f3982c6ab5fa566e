"""The waiting line: wait-mode callers of one limiter are admitted in arrival order.

:class:`WaitingLine` is a first-in, first-out lock that threads and asyncio tasks can queue on
together. Only the caller at the front waits for a slot; it passes the front to the next
caller when it is admitted or gives up, so nobody queued later can overtake it in this process.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque


class _Waiter:
    __slots__ = ("event", "loop", "future", "handed")

    def __init__(
        self,
        event: threading.Event | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        future: asyncio.Future[bool] | None = None,
    ) -> None:
        self.event = event
        self.loop = loop
        self.future = future
        self.handed = False


def _wake(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)


class WaitingLine:
    """A FIFO lock shared by threads and asyncio tasks.

    Example:
        >>> line = WaitingLine()
        >>> line.join(timeout=1.0)
        True
        >>> line.leave()
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._busy = False
        self._queue: deque[_Waiter] = deque()

    def __len__(self) -> int:
        """How many callers are queued behind the front."""
        return len(self._queue)

    def join(self, timeout: float | None = None) -> bool:
        """Block until at the front (True), or until ``timeout`` seconds pass (False)."""
        with self._mutex:
            if not self._busy and not self._queue:
                self._busy = True
                return True
            event = threading.Event()
            waiter = _Waiter(event=event)
            self._queue.append(waiter)
        event.wait(timeout)
        return self._settle(waiter)

    async def ajoin(self, timeout: float | None = None) -> bool:
        """Async twin of :meth:`join`; the event loop keeps running while queued."""
        loop = asyncio.get_running_loop()
        with self._mutex:
            if not self._busy and not self._queue:
                self._busy = True
                return True
            future: asyncio.Future[bool] = loop.create_future()
            waiter = _Waiter(loop=loop, future=future)
            self._queue.append(waiter)
        try:
            await asyncio.wait({future}, timeout=timeout)
        except asyncio.CancelledError:
            if self._settle(waiter):
                self.leave()
            raise
        return self._settle(waiter)

    def _settle(self, waiter: _Waiter) -> bool:
        """After a wake-up or a timeout: True if the front was handed over, else leave the queue."""
        with self._mutex:
            if waiter.handed:
                return True
            self._queue.remove(waiter)
            return False

    def leave(self) -> None:
        """Give the front to the next caller in line (or free the line)."""
        with self._mutex:
            while self._queue:
                waiter = self._queue.popleft()
                if waiter.event is not None:
                    waiter.handed = True
                    waiter.event.set()
                    return
                if waiter.loop is None or waiter.future is None:  # pragma: no cover - never built
                    continue
                try:
                    waiter.loop.call_soon_threadsafe(_wake, waiter.future)
                except RuntimeError:  # its event loop is closed: nobody is waiting there
                    continue
                waiter.handed = True
                return
            self._busy = False
