"""Real local receivers for notifications: an HTTP server that records webhook deliveries (and
can answer 500 first, or never answer), and a minimal SMTP server on socketserver."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived


@dataclass
class WebhookReceiver:
    """Answers each POST with the next status of ``statuses`` (then 200), recording every one."""

    statuses: list[int] = field(default_factory=list)
    received: list[Delivery] = field(default_factory=list)
    #: 0: a free port; another: that port (a receiver coming back where it was).
    port: int = 0

    def __post_init__(self) -> None:
        receiver = self
        self._arrived = threading.Condition()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with receiver._arrived:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.received.append(
                        Delivery(
                            {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()
                        )
                    )
                    receiver._arrived.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def wait_for(self, count: int, timeout: float = 15.0) -> list[Delivery]:
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SilentReceiver:
    """Accepts connections and never answers: a receiver that hangs every delivery."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


class SmtpReceiver:
    """Enough SMTP (HELO/EHLO, MAIL, RCPT, DATA, QUIT) to receive messages in a test."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        receiver = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                def say(line: str) -> None:
                    self.wfile.write(line.encode() + b"\r\n")
                    self.wfile.flush()

                say("220 localhost test SMTP")
                sender, recipients = None, []
                while True:
                    raw = self.rfile.readline()
                    if not raw:
                        return
                    line = raw.decode().rstrip("\r\n")
                    verb = line[:4].upper()
                    if verb in ("HELO", "EHLO"):
                        say("250 localhost")
                    elif verb == "MAIL":
                        sender = line.split(":", 1)[1].strip()
                        say("250 OK")
                    elif verb == "RCPT":
                        recipients.append(line.split(":", 1)[1].strip())
                        say("250 OK")
                    elif verb == "DATA":
                        say("354 end with .")
                        data = []
                        while (chunk := self.rfile.readline().decode()) not in (".\r\n", ""):
                            data.append(chunk)
                        with receiver._arrived:
                            receiver.messages.append(
                                {"from": sender, "to": recipients, "data": "".join(data)}
                            )
                            receiver._arrived.notify_all()
                        say("250 queued")
                    elif verb == "QUIT":
                        say("221 bye")
                        return
                    else:
                        say("250 OK")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def wait_for(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.messages) >= count, timeout)
            return list(self.messages)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
