"""What users install, run as they run it: ``python -m tests.installs [INSTALL ...]``.

Builds sqlgate's wheel and every declared package's wheel into one wheelhouse, once; then, for
the base install and for each extra alone, a fresh virtual environment gets only that install
from the wheelhouse (``--no-index``: nothing else can slip in), and:

- imports every module of the install's reach (``tests.installs.reach``) in isolated mode;
- runs ``sqlgate ask --yes``, ``batch --yes``, ``ask --defer``, ``approvals list`` and
  ``runs list`` on a SQLite database against the scripted OpenAI-compatible server (a real local
  HTTP server with scripted replies, not a model);
- runs the extra's own command against its service: a PostgreSQL state database and schema
  (``SQLGATE_TEST_POSTGRES_URL``), a MySQL schema (``SQLGATE_TEST_MYSQL_URL``), a DuckDB schema,
  the Redis rate-limit window (``SQLGATE_TEST_REDIS_URL``), ``serve`` answering over HTTP,
  ``mcp`` listing its tools over stdio, a worker answering ``batch --distributed`` through Redis,
  traces exported by OTLP under ``OTEL_SERVICE_NAME``. A service whose URL is unset is skipped
  with its reason.

Prints one line per check with its seconds, and exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.installs.reach import INSTALLS, ROOT, Graph, reach
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer

QUESTION = sc.PRODUCT_COUNT
BATCH = [sc.PRODUCT_COUNT, sc.TOP_CATEGORIES, sc.ORDERS_BY_SEGMENT]
SERVICE_NAME = "sqlgate-install-check"


class CheckFailed(Exception):
    pass


@dataclass
class Venv:
    install: str
    path: Path
    work: Path
    env: dict[str, str]
    results: list[tuple[str, str, float]] = field(default_factory=list)

    @property
    def sqlgate(self) -> str:
        return str(self.path / "bin" / "sqlgate")

    def run(
        self, *args: str, env: dict[str, str] | None = None, code: int = 0, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.sqlgate, *args],
            cwd=self.work,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != code or "Traceback" in done.stderr:
            raise CheckFailed(
                f"sqlgate {' '.join(args)} exited {done.returncode} (wanted {code}):\n"
                f"{done.stderr[-2000:]}{done.stdout[-1000:]}"
            )
        return done

    def check(self, name: str, body: Callable[[], str | None]) -> None:
        started = time.monotonic()
        try:
            skipped = body()
            outcome = f"skipped: {skipped}" if skipped else "ok"
        except (CheckFailed, subprocess.TimeoutExpired, OSError, AssertionError) as exc:
            outcome = f"FAILED: {exc}"
        seconds = time.monotonic() - started
        self.results.append((name, outcome, seconds))
        print(f"  [{self.install}] {name}: {outcome} ({seconds:.1f} s)", flush=True)


def _pip(*args: str) -> None:
    # Without PYTHONPATH: a source tree on it (and its sqlgate.egg-info) would pass for an
    # installed sqlgate.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:  # pip's output is shown only then: its warnings are noise here
        raise CheckFailed(f"pip {' '.join(args[:2])} failed:\n{done.stderr[-3000:]}")


def build_wheelhouse(target: Path) -> Path:
    """sqlgate's wheel and the wheels of everything ``[all]`` brings, in one directory."""
    _pip("wheel", "--wheel-dir", str(target), f"{ROOT}[all]")
    return target


def make_venv(install: str, wheelhouse: Path, where: Path) -> Path:
    """A fresh virtual environment with only ``install``, from the wheelhouse alone."""
    path = where / f"venv-{install}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    requirement = "sqlgate" if install == "base" else f"sqlgate[{install}]"
    _pip(
        "--python",
        str(path / "bin" / "python"),
        "install",
        "--no-compile",  # each module is compiled when first imported, as the checks import it
        "--no-index",
        "--find-links",
        str(wheelhouse),
        requirement,
    )
    if not (path / "bin" / "sqlgate").exists():
        raise CheckFailed(f"pip installed no sqlgate command into {path}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, token: str | None = None, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {token}"} if token else {}),
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _statuses(path: Path) -> list[str]:
    return [json.loads(line)["status"] for line in path.read_text().splitlines()]


# --- the checks every install runs ---------------------------------------------------------


def check_imports(venv: Venv, graph: Graph) -> None:
    listing = venv.work / "reach.txt"
    listing.write_text("\n".join(reach(graph, venv.install)) + "\n")
    script = ROOT / "tests" / "installs" / "import_reach.py"

    def body() -> None:
        done = subprocess.run(
            [str(venv.path / "bin" / "python"), "-I", str(script), str(listing)],
            cwd=venv.work,
            env=venv.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise CheckFailed(done.stdout[-3000:] + done.stderr[-2000:])

    venv.check("imports its reach", body)


def check_base_commands(venv: Venv, db: str) -> None:
    def ask() -> None:
        done = venv.run("ask", QUESTION, "--db", db, "--yes", "--json")
        status = json.loads(done.stdout)["status"]
        assert status == "answered", status

    def batch() -> None:
        questions = venv.work / "questions.txt"
        questions.write_text("\n".join(BATCH) + "\n")
        out = venv.work / "batch.jsonl"
        venv.run("batch", str(questions), "--db", db, "--yes", "--out", str(out))
        assert _statuses(out) == ["answered"] * len(BATCH), _statuses(out)

    def defer_then_list() -> None:
        venv.run("ask", QUESTION, "--db", db, "--defer", code=11)
        listed = venv.run("approvals", "list", "--json")
        assert len(json.loads(listed.stdout)) >= 1, listed.stdout
        runs = venv.run("runs", "list", "--json")
        assert len(json.loads(runs.stdout)) >= 1, runs.stdout

    venv.check("ask --yes", ask)
    venv.check("batch --yes", batch)
    venv.check("ask --defer, approvals list, runs list", defer_then_list)


# --- each extra's own command ----------------------------------------------------------------


@contextmanager
def postgres_database(url: str) -> Iterator[str]:
    """A database of its own on the PostgreSQL server at ``url``, dropped afterwards."""
    import sqlalchemy as sa

    name = f"sqlgate_install_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield str(sa.make_url(url).set(database=name).render_as_string(hide_password=False))
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def check_postgres(venv: Venv, db: str) -> str | None:
    url = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
    if not url:
        return "SQLGATE_TEST_POSTGRES_URL is not set"
    with postgres_database(url) as state:
        env = {"SQLGATE_STATE_URL": state}
        venv.run("ask", QUESTION, "--db", db, "--defer", env=env, code=11)
        listed = venv.run("approvals", "list", "--json", env=env)
        assert len(json.loads(listed.stdout)) == 1, listed.stdout
        shown = venv.run("schema", "--db", state, "--json")
        assert "approval" in shown.stdout, shown.stdout[:500]
    return None


def check_mysql(venv: Venv) -> str | None:
    url = os.environ.get("SQLGATE_TEST_MYSQL_URL")
    if not url:
        return "SQLGATE_TEST_MYSQL_URL is not set"
    venv.run("schema", "--db", url, "--json")
    return None


def check_duckdb(venv: Venv) -> str | None:
    import duckdb

    path = venv.work / "shop.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE regions (id INTEGER PRIMARY KEY, name VARCHAR)")
    shown = venv.run("schema", "--db", f"duckdb:///{path}", "--json")
    assert "regions" in shown.stdout, shown.stdout[:500]
    return None


def _redis_url(db: int) -> str | None:
    url = os.environ.get("SQLGATE_TEST_REDIS_URL")
    return url.rsplit("/", 1)[0] + f"/{db}" if url else None


def check_redis(venv: Venv) -> str | None:
    url = _redis_url(12)
    if not url:
        return "SQLGATE_TEST_REDIS_URL is not set"
    env = {"SQLGATE_RATE_BACKEND": url}
    shown = venv.run("limits", "--json", env=env)
    assert "requests" in shown.stdout, shown.stdout[:500]
    return None


def check_serve(venv: Venv, db: str) -> str | None:
    port = _free_port()
    token = "install-check-analyst"
    env = {
        **venv.env,
        "SQLGATE_TOKENS": json.dumps([{"token": token, "actor": "ana", "role": "analyst"}]),
    }
    server = subprocess.Popen(
        [venv.sqlgate, "serve", "--db", db, "--port", str(port)],
        cwd=venv.work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/health")
                break
            except OSError as exc:
                if server.poll() is not None or time.monotonic() > deadline:
                    said = server.stderr.read() if server.stderr else ""
                    raise CheckFailed(f"serve did not come up: {said[-2000:]}") from exc
                time.sleep(0.2)
        run_id = _get(f"{base}/runs", token, {"question": QUESTION})["run_id"]
        deadline = time.monotonic() + 60
        status = "queued"
        while status in {"queued", "running"} and time.monotonic() < deadline:
            time.sleep(0.2)
            status = _get(f"{base}/runs/{run_id}", token)["status"]
        assert status == "awaiting_approval", status
    finally:
        server.terminate()
        server.wait(timeout=30)
    return None


def check_mcp(venv: Venv, db: str) -> str | None:
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "install-check", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    process = subprocess.Popen(
        [venv.sqlgate, "mcp", "--db", db],
        cwd=venv.work,
        env=venv.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        for message in messages:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
        tools: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            reply = json.loads(line)
            if reply.get("id") == 2:
                tools = [tool["name"] for tool in reply["result"]["tools"]]
                break
        assert "ask" in tools, (tools, process.stderr.read() if process.poll() is not None else "")
    finally:
        process.kill()
        process.wait(timeout=30)
    return None


def check_celery(venv: Venv, db: str) -> str | None:
    broker = _redis_url(11)
    if not broker:
        return "SQLGATE_TEST_REDIS_URL is not set"
    env = {**venv.env, "SQLGATE_BROKER_URL": broker}
    log = venv.work / "worker.log"
    with log.open("wb") as sink:
        worker = subprocess.Popen(
            [venv.sqlgate, "worker", "--concurrency", "1", "--loglevel", "INFO"],
            cwd=venv.work,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    questions = venv.work / "distributed.txt"
    questions.write_text("\n".join(BATCH) + "\n")
    out = venv.work / "distributed.jsonl"
    args = [str(questions), "--db", db, "--distributed", "--yes", "--out", str(out)]
    batch = subprocess.Popen(
        [venv.sqlgate, "batch", *args],
        cwd=venv.work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while batch.poll() is None:
            if worker.poll() is not None:
                raise CheckFailed(f"the worker stopped:\n{log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise CheckFailed(
                    f"no answer in 300 s; the worker said:\n{log.read_text()[-2000:]}"
                )
            time.sleep(0.5)
        said = batch.stderr.read() if batch.stderr else ""
        if batch.returncode != 0 or "Traceback" in said:
            raise CheckFailed(f"batch --distributed exited {batch.returncode}:\n{said[-2000:]}")
        assert _statuses(out) == ["answered"] * len(BATCH), _statuses(out)
    finally:
        for process in (batch, worker):
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=60)
    return None


class _Sink(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        self.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def check_otel(venv: Venv, db: str) -> str | None:
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    _Sink.bodies = []
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    try:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
            "OTEL_SERVICE_NAME": SERVICE_NAME,
        }
        venv.run("ask", QUESTION, "--db", db, "--yes", "--json", env=env)
        sent = b"".join(_Sink.bodies)
        assert sent, "no trace reached the OTLP endpoint"
        assert SERVICE_NAME.encode() in sent, "the traces do not carry OTEL_SERVICE_NAME"
    finally:
        sink.shutdown()
        sink.server_close()
    return None


def check_own_command(venv: Venv, db: str) -> None:
    own: dict[str, tuple[str, Callable[[], str | None]]] = {
        "postgres": ("PostgreSQL state and schema", lambda: check_postgres(venv, db)),
        "mysql": ("MySQL schema", lambda: check_mysql(venv)),
        "duckdb": ("DuckDB schema", lambda: check_duckdb(venv)),
        "redis": ("limits in Redis", lambda: check_redis(venv)),
        "server": ("serve answers over HTTP", lambda: check_serve(venv, db)),
        "mcp": ("mcp lists its tools", lambda: check_mcp(venv, db)),
        "celery": ("a worker answers batch --distributed", lambda: check_celery(venv, db)),
        "otel": ("traces exported by OTLP", lambda: check_otel(venv, db)),
    }
    if venv.install in own:
        name, body = own[venv.install]
        venv.check(name, body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "installs", nargs="*", metavar="INSTALL", help=f"some of {', '.join(INSTALLS)} (all)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the virtual environments")
    args = parser.parse_args()
    unknown = set(args.installs) - set(INSTALLS)
    if unknown:
        parser.error(f"no such install: {', '.join(sorted(unknown))}")
    args.installs = args.installs or list(INSTALLS)

    from orchestrator.features.demo.database import build_demo_database

    started = time.monotonic()
    where = Path(tempfile.mkdtemp(prefix="sqlgate-installs-"))
    graph = Graph()
    failed = 0
    try:
        wheelhouse = build_wheelhouse(where / "wheelhouse")
        print(f"wheelhouse built ({time.monotonic() - started:.1f} s)", flush=True)
        with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as model:
            for install in args.installs:
                began = time.monotonic()
                try:
                    path = make_venv(install, wheelhouse, where)
                except CheckFailed as exc:
                    failed += 1
                    print(f"{install}: FAILED to install: {exc}", flush=True)
                    continue
                work = where / f"work-{install}"
                work.mkdir()
                db = f"sqlite:///{build_demo_database(work / 'shop.db')}"
                env = {
                    "PATH": f"{path / 'bin'}:/usr/bin:/bin",
                    "HOME": str(work),
                    "SQLGATE_STATE_DIR": str(work / "state"),
                    "OPENAI_API_KEY": "install-check",
                    "OPENAI_BASE_URL": model.base_url,
                    "SQLGATE_MODEL": "sqlgate-scripted",
                    "SQLGATE_RATE_LIMIT": "1000/60",
                    "COLUMNS": "200",
                }
                venv = Venv(install, path, work, env)
                print(f"{install}: installed ({time.monotonic() - began:.1f} s)", flush=True)
                check_imports(venv, graph)
                check_base_commands(venv, db)
                check_own_command(venv, db)
                failed += sum(outcome.startswith("FAILED") for _, outcome, _ in venv.results)
                print(f"{install}: {time.monotonic() - began:.1f} s in all", flush=True)
            model.assert_no_errors()
    finally:
        if args.keep:
            print(f"kept in {where}")
        else:
            shutil.rmtree(where, ignore_errors=True)
    used = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = used.ru_utime + used.ru_stime + children.ru_utime + children.ru_stime
    print(
        f"installs checked: {len(args.installs)}, failed checks: {failed}, "
        f"{time.monotonic() - started:.1f} s ({cpu:.1f} s of CPU; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
