"""Shared setup for the pipeline benchmarks: the demo database, the scripted model, tables.

The model is NEVER a live one: it is sqlgate's scripted OpenAI-compatible server
(``tests/scripted_llm``), run in a child process and reached over real local HTTP through the
real ``openai`` client. Its replies are fixed per question by scenarios; it adds no latency.
Running it in its own process keeps its work (and the request bodies it keeps) out of the
orchestrator's timings and memory figures. The child sets ``disable_nagle_algorithm`` on the
server's request handler: left on, Nagle's algorithm meets the client's delayed ACK and every
reply waits about 40 ms on the socket, which is the test server's artefact, not model latency
(``--nagle`` leaves it on, for comparison).

Besides the seed's scenarios, this module generates 50 distinct simple questions on the demo
database (orders per month and status, customers per region and segment, products per category,
employees per region), each with a reasoning reply, SQL and a templated answer. ``copies``
repeats them with a distinguishing suffix (" [#0123]") for batches of hundreds or thousands.

Run as ``python benchmarks/_harness.py --serve [--copies N]`` it is that child process: it prints
the base URL, serves until its standard input closes, then prints how many requests it answered.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from approvals import ApproveAll  # noqa: E402
from orchestrator.core.database import TargetDatabase  # noqa: E402
from orchestrator.core.llm import LLMClient, LLMSettings  # noqa: E402
from orchestrator.core.pipeline import Pipeline, PipelineConfig  # noqa: E402
from orchestrator.features.demo.database import build_demo_database  # noqa: E402
from orchestrator.wiring import run_hooks  # noqa: E402
from ratelimit import ManualClock, SlidingWindowLimiter  # noqa: E402

MODEL_NOTE = (
    "Model: sqlgate's scripted OpenAI-compatible server (tests/scripted_llm) over local HTTP in a "
    "child process (TCP_NODELAY set); scripted replies with no added latency, NOT a live model."
)
SCRIPTED_MODEL = "sqlgate-scripted-benchmark"

# -- 50 generated simple questions -------------------------------------------------------------

_MONTHS = [(y, m) for y in (2024, 2025) for m in range(1, 13)]
_STATUSES = ["delivered", "shipped", "cancelled", "returned"]
_REGIONS = ["Northeast", "Southeast", "Midwest", "Southwest", "West", "Canada"]
_SEGMENTS = ["Consumer", "Small Business", "Enterprise"]
_CATEGORIES = [
    "Electronics",
    "Home & Kitchen",
    "Sports & Outdoors",
    "Books",
    "Clothing",
    "Beauty",
    "Toys & Games",
    "Office Supplies",
]


def _generated() -> list[tuple[str, dict[str, Any], str, str]]:
    """(question, reasoning kwargs, SQL, what the count is of) for the 50 generated questions."""
    out: list[tuple[str, dict[str, Any], str, str]] = []
    for y, m in _MONTHS:
        end = f"{y + 1}-01" if m == 12 else f"{y}-{m + 1:02d}"
        out.append(
            (
                f"Count the orders placed in {y}-{m:02d}.",
                {"tables": ["orders"], "filters": [("orders", "order_date", f"in {y}-{m:02d}")]},
                f"SELECT COUNT(*) AS orders FROM orders WHERE order_date >= '{y}-{m:02d}-01' "
                f"AND order_date < '{end}-01'",
                f"orders in {y}-{m:02d}",
            )
        )
    for s in _STATUSES:
        out.append(
            (
                f"How many orders have the status {s}?",
                {
                    "tables": ["orders"],
                    "filters": [("orders", "status", f"= '{s}'")],
                    "needs_data_context": True,
                },
                f"SELECT COUNT(*) AS orders FROM orders WHERE status = '{s}'",
                f"{s} orders",
            )
        )
    for r in _REGIONS:
        out.append(
            (
                f"How many customers are in the {r} region?",
                {
                    "tables": ["customers", "regions"],
                    "filters": [("regions", "name", f"= '{r}'")],
                    "joins": [("customers", "regions", "customers.region_id = regions.region_id")],
                },
                "SELECT COUNT(c.customer_id) AS customers FROM customers AS c JOIN regions AS r "
                f"ON r.region_id = c.region_id WHERE r.name = '{r}'",
                f"customers in {r}",
            )
        )
    for s in _SEGMENTS:
        out.append(
            (
                f"How many customers belong to the {s} segment?",
                {
                    "tables": ["customers"],
                    "filters": [("customers", "segment", f"= '{s}'")],
                    "needs_data_context": True,
                },
                f"SELECT COUNT(*) AS customers FROM customers WHERE segment = '{s}'",
                f"{s} customers",
            )
        )
    for c in _CATEGORIES:
        out.append(
            (
                f"Count the products of the {c} category.",
                {
                    "tables": ["products", "categories"],
                    "filters": [("categories", "name", f"= '{c}'")],
                    "joins": [
                        ("products", "categories", "products.category_id = categories.category_id")
                    ],
                },
                "SELECT COUNT(p.product_id) AS products FROM products AS p JOIN categories AS c "
                f"ON c.category_id = p.category_id WHERE c.name = '{c}'",
                f"products in {c}",
            )
        )
    for r in _REGIONS:
        out.append(
            (
                f"How many employees work in the {r} region?",
                {"tables": ["employees", "regions"], "filters": [("regions", "name", f"= '{r}'")]},
                "SELECT COUNT(e.employee_id) AS employees FROM employees AS e JOIN regions AS r "
                f"ON r.region_id = e.region_id WHERE r.name = '{r}'",
                f"employees in {r}",
            )
        )
    return out[:50]


GENERATED_QUESTIONS: list[str] = [q for q, *_ in _generated()]
assert len(GENERATED_QUESTIONS) == len(set(GENERATED_QUESTIONS)) == 50


def copy_suffix(n: int) -> str:
    return f" [#{n:04d}]"


def many_questions(n: int) -> list[str]:
    """``n`` distinct questions: the 50 generated ones, then suffixed copies of them."""
    return [
        GENERATED_QUESTIONS[i % 50] + (copy_suffix(i // 50) if i >= 50 else "") for i in range(n)
    ]


def scenarios(copies: int = 1) -> dict[str, Any]:
    """The seed's scenarios plus the generated ones (and ``copies - 1`` suffixed copies of those)."""
    from tests.scripted_llm.scenarios import SCENARIOS, Scenario, reasoning

    merged: dict[str, Any] = dict(SCENARIOS)
    for question, plan, sql, what in _generated():
        scenario = Scenario(
            reasoning=reasoning(aggregations=["COUNT(*)"], **plan),
            sql=sql,
            answer=lambda p, what=what: f"There are {p['rows'][0][0]} {what}.",
        )
        merged[question] = scenario
        for n in range(1, copies):
            merged[question + copy_suffix(n)] = scenario
    return merged


# -- the scripted model in a child process ---------------------------------------------------------


class ScriptedModel:
    """The scripted server in a child process; ``base_url`` while running, ``served`` after."""

    def __init__(self, copies: int = 1, *, nodelay: bool = True) -> None:
        self.copies = copies
        self.nodelay = nodelay
        self.base_url = ""
        self.served: int | None = None
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> ScriptedModel:
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", "--copies", str(self.copies)]
            + ([] if self.nodelay else ["--nagle"]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("http://"):
            self._proc.kill()
            raise RuntimeError(f"the scripted server did not start: {line!r}")
        self.base_url = line
        return self

    def __exit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        out, _ = proc.communicate(input="", timeout=30)
        for line in out.splitlines():
            if line.startswith("served "):
                self.served = int(line.split()[1])


def _serve(copies: int, nodelay: bool = True) -> None:
    from tests.scripted_llm import server as scripted_server
    from tests.scripted_llm.scenarios import ScenarioScript
    from tests.scripted_llm.server import ScriptedLLMServer

    if nodelay:
        scripted_server._Handler.disable_nagle_algorithm = True
    with ScriptedLLMServer(ScenarioScript(scenarios(copies))) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our input
        served = len(server.requests)
        errors = list(server.errors)
    for e in errors[:5]:
        print("error", e, flush=True)
    print("served", served, flush=True)


# -- pipelines -------------------------------------------------------------------------------------


def demo_database(directory: str | Path | None = None) -> Path:
    """A fresh demo database (seed 7) in ``directory`` (a temporary one by default)."""
    directory = (
        Path(directory)
        if directory is not None
        else Path(tempfile.mkdtemp(prefix="sqlgate-bench-"))
    )
    return build_demo_database(directory / "demo.sqlite")


def unlimited() -> SlidingWindowLimiter:
    """A limiter that never makes anyone wait (the benchmarks that are not about the limit)."""
    return SlidingWindowLimiter(limit=1_000_000, window=1.0, mode="wait")


def seed_limiter(clock: ManualClock) -> SlidingWindowLimiter:
    """The seed's limit, 5 requests per 60 s, waiting on a virtual clock."""
    return SlidingWindowLimiter(
        limit=5, window=60.0, clock=clock, sleep=clock.sleep, mode="wait", max_wait=3600.0
    )


def pipeline(
    db_path: Path,
    base_url: str,
    *,
    k: int = 10,
    limiter: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    progress: Any = None,
    reviewer: Any = None,
) -> Pipeline:
    llm = LLMClient(
        LLMSettings(model=SCRIPTED_MODEL, base_url=base_url),
        limiter=limiter if limiter is not None else unlimited(),
        sleep=sleep,
    )
    return Pipeline(
        TargetDatabase(f"sqlite:///{db_path}"),
        llm,
        reviewer if reviewer is not None else ApproveAll(),
        config=PipelineConfig(k=k),
        progress=progress,
        hooks=run_hooks(),  # every feature but memory
    )


# -- output ------------------------------------------------------------------------------------


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a plain-text table with a title."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    right = [all(_numeric(r[i]) for r in cells[1:]) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=False)
        ).rstrip()

    print(f"\n{title}")
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))


def _numeric(text: str) -> bool:
    t = text.replace(",", "").replace("%", "").replace("×", "").replace("x", "").strip()
    try:
        float(t.split()[0] if t else "x")
        return True
    except ValueError:
        return False


def header(title: str) -> None:
    print("=" * 78)
    print(title)
    print(MODEL_NOTE)
    print("=" * 78)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="serve the scripted model (used by the benchmarks)"
    )
    parser.add_argument("--serve", action="store_true", required=True)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument(
        "--nagle", action="store_true", help="leave Nagle's algorithm on (about 40 ms a reply)"
    )
    args = parser.parse_args()
    _serve(args.copies, nodelay=not args.nagle)
