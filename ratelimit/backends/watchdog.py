"""A deadline for blocking socket calls that the socket's peer may never answer.

A server process that is frozen (stopped, swapped out, stuck) keeps its TCP connections open:
the kernel still acknowledges what is sent, so neither keepalives nor socket timeouts inside a
driver notice anything, and a call can wait for ever. :class:`SocketWatchdog` shuts a socket
down (both directions) when its deadline passes; the blocked read then sees end-of-file and the
driver raises its ordinary connection error at once.

One daemon thread serves every socket armed on one watchdog. Arming is a dictionary insert
under a lock; the thread is woken only when it was idle, so a fast call costs no context switch.

Example:
    >>> import socket, time
    >>> left, right = socket.socketpair()
    >>> dog = SocketWatchdog()
    >>> token = dog.arm(time.monotonic() + 0.05, left.fileno())
    >>> left.recv(1)   # nobody writes: the watchdog ends the wait with end-of-file
    b''
    >>> dog.disarm(token)   # True: the deadline passed and the socket was shut
    True
    >>> left.close(); right.close()
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time


class SocketWatchdog:
    """Shuts down armed sockets whose deadline (on ``time.monotonic``) has passed."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[float, int]] = {}
        self._fired: set[int] = set()
        self._ids = itertools.count()
        self._idle = True
        self._thread: threading.Thread | None = None

    def arm(self, deadline: float, fileno: int) -> int:
        """Watch ``fileno`` until :meth:`disarm`; shut it down at ``deadline``. Returns a token."""
        if self._pid != os.getpid():
            # a forked child inherits neither the thread nor, safely, the lock: start afresh
            self.__init__()  # type: ignore[misc]
        with self._cond:
            token = next(self._ids)
            self._armed[token] = (deadline, fileno)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._watch, name="sqlgate-ratelimit-watchdog", daemon=True
                )
                self._thread.start()
            elif self._idle:
                self._cond.notify()
            return token

    def disarm(self, token: int) -> bool:
        """Stop watching; True when the deadline had passed and the socket was shut down.

        Once this returns, the watchdog never touches that file descriptor again, so the caller
        may close it.
        """
        with self._cond:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def _watch(self) -> None:
        with self._cond:
            while True:
                if not self._armed:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                    continue
                now = time.monotonic()
                for token, (deadline, fileno) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[token]
                        self._fired.add(token)
                        _shut(fileno)
                if self._armed:
                    # arms made meanwhile do not wake this thread: polling at least every
                    # 50 ms bounds how late a shorter deadline armed later can be served
                    earliest = min(deadline for deadline, _ in self._armed.values())
                    self._cond.wait(min(max(earliest - now, 0.0), 0.05))


def _shut(fileno: int) -> None:
    """Shut the connection on ``fileno`` down without closing the descriptor (its owner does)."""
    try:
        sock = socket.socket(fileno=fileno)
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.detach()  # the descriptor stays open and owned by the driver
