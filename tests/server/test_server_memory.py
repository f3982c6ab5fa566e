"""A 200 MB body sent to a server in its own process: refused, and the server's memory stays flat.

The figures (peak resident memory before and after, bytes the client got to send, seconds) are
printed; run with ``-s`` to see them. Resident memory is read from /proc (Linux only).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT
from tests.server.test_server_hardening import _head, _read_response

pytestmark = pytest.mark.slow

TOTAL = 200 * 1024 * 1024
CHUNK = 1024 * 1024
FLAT_MIB = 20  # allowed growth of the peak resident set, in MiB


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of ``pid``, in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0])
    return found


@pytest.fixture
def server_process(demo_db: Path, tmp_path: Path) -> Iterator[tuple[int, str]]:
    if not Path("/proc/self/status").exists():
        pytest.skip("resident memory is read from /proc (Linux only)")
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.server.subprocess_server",
            str(demo_db),
            f"sqlite:///{tmp_path / 'state.sqlite'}",
            str(port),
        ],
        cwd=ROOT,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the server process did not start")
            time.sleep(0.1)
        yield process.pid, base_url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _push(base_url: str, headers: dict[str, str], *, chunked: bool) -> tuple[int, int, float]:
    """Send a TOTAL-byte body while reading the answer; (status, bytes sent, seconds)."""
    host, port = base_url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        if chunked:
            headers = {**headers, "Transfer-Encoding": "chunked"}
        else:
            headers = {**headers, "Content-Length": str(TOTAL)}
        sock.sendall(_head("POST", "/runs", {"Content-Type": "application/json", **headers}))
        answer: list[int] = []
        reader = threading.Thread(target=lambda: answer.append(_read_response(sock)[0]))
        reader.start()
        sent = 0
        piece = b" " * CHUNK
        try:
            while sent < TOTAL:
                frame = b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece
                sock.sendall(frame)
                sent += len(piece)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection after refusing
        reader.join(timeout=30)
    return (answer[0] if answer else 0), sent, time.monotonic() - started


CASES = {
    "no token, Content-Length 200 MB": ({}, False, 413),
    "no token, chunked 200 MB": ({}, True, 401),
    "analyst token, Content-Length 200 MB": ({"Authorization": "Bearer tok-alice"}, False, 413),
    "analyst token, chunked 200 MB": ({"Authorization": "Bearer tok-alice"}, True, 413),
}


def test_a_200_mb_body_leaves_the_servers_memory_flat(server_process: tuple[int, str]) -> None:
    pid, base_url = server_process
    httpx.post(f"{base_url}/runs", json={"question": "warm up"})  # first request's imports
    before = _memory_kib(pid)
    print(
        f"\nserver pid {pid}: before VmRSS {before['VmRSS'] / 1024:.1f} MiB, "
        f"peak VmHWM {before['VmHWM'] / 1024:.1f} MiB"
    )
    for what, (headers, chunked, expected) in CASES.items():
        status, sent, seconds = _push(base_url, headers, chunked=chunked)
        after = _memory_kib(pid)
        grown = (after["VmHWM"] - before["VmHWM"]) / 1024
        print(
            f"{what}: HTTP {status} after sending {sent / 2**20:.0f} MiB in {seconds:.2f} s; "
            f"VmRSS {after['VmRSS'] / 1024:.1f} MiB, peak VmHWM {after['VmHWM'] / 1024:.1f} MiB "
            f"(+{grown:.1f} MiB)"
        )
        assert status == expected, what
        assert grown < FLAT_MIB, what
    assert httpx.get(f"{base_url}/health").json() == {"status": "ok"}
