"""The demo database: a small retail business in one SQLite file, generated deterministically.

The same seed always gives a byte-identical file, so recorded model answers stay valid and a
fresh machine needs neither network nor downloads to run ``sqlgate demo``.

Example:
    >>> import tempfile, sqlite3
    >>> from pathlib import Path
    >>> path = build_demo_database(Path(tempfile.mkdtemp()) / "demo.sqlite")
    >>> sqlite3.connect(path).execute("SELECT COUNT(*) FROM regions").fetchone()[0]
    6
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from orchestrator.core.sqlite_file import write_sqlite_atomically
from orchestrator.features.demo.data import (
    BRANDS,
    CATEGORIES,
    DISCOUNTS,
    FIRST_NAMES,
    LAST_NAMES,
    PRODUCTS_PER_CATEGORY,
    REGION_WEIGHTS,
    REGIONS,
    SCHEMA,
    SEGMENTS,
)

__all__ = [
    "DEMO_SCHEMA_VERSION",
    "build_demo_database",
    "default_cache_dir",
    "ensure_demo_database",
]

#: Bump whenever the generator's output changes, so cached files are rebuilt.
DEMO_SCHEMA_VERSION = 1

N_CUSTOMERS = 500
N_ORDERS = 4000
FIRST_DAY = dt.date(2024, 1, 1)
LAST_DAY = dt.date(2025, 12, 31)


def build_demo_database(path: str | os.PathLike[str], seed: int = 7) -> Path:
    """Write the demo database to ``path`` (replacing it atomically) and return the path.

    The same ``seed`` gives a byte-identical file; the file appears only once complete.
    """

    def fill(con: sqlite3.Connection) -> None:
        con.execute("PRAGMA foreign_keys = ON")
        con.executescript(SCHEMA)
        con.execute("BEGIN")
        _populate(con, random.Random(seed))
        con.execute("COMMIT")
        con.execute("ANALYZE")

    return write_sqlite_atomically(path, fill, what="demo database")


def default_cache_dir() -> Path:
    """Where ``ensure_demo_database`` keeps its file: ``$XDG_CACHE_HOME/sqlgate`` or ``~/.cache/sqlgate``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sqlgate"


def ensure_demo_database(cache_dir: str | os.PathLike[str] | None = None, seed: int = 7) -> Path:
    """Return the demo database under ``cache_dir``, building it the first time.

    The file name carries the generator version and seed, so a newer generator never reuses an
    older file. Concurrent callers are safe: each builds to a temporary file and renames it.
    """
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = directory / f"sqlgate-demo-v{DEMO_SCHEMA_VERSION}-seed{seed}.sqlite"
    if path.is_file() and _looks_complete(path):
        return path
    return build_demo_database(path, seed=seed)


def _looks_complete(path: Path) -> bool:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            (count,) = con.execute("SELECT COUNT(*) FROM order_items").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return count > 0


# --- generation -------------------------------------------------------------------------------


T = TypeVar("T")


def _weighted(rng: random.Random, choices: Sequence[tuple[T, int]]) -> T:
    return rng.choices([c for c, _ in choices], weights=[w for _, w in choices])[0]


def _day(start: dt.date, end: dt.date, rng: random.Random) -> dt.date:
    return start + dt.timedelta(days=rng.randint(0, (end - start).days))


def _money(value: float) -> float:
    return round(value + 1e-9, 2)


def _email(first: str, last: str, n: int, domain: str) -> str:
    local = f"{first}.{last}".lower().replace("'", "").replace(" ", "")
    return f"{local}{n}@{domain}"


def _populate(con: sqlite3.Connection, rng: random.Random) -> None:
    con.executemany(
        "INSERT INTO regions VALUES (?, ?, ?)",
        [(i, name, country) for i, (name, country, _) in enumerate(REGIONS, start=1)],
    )
    reps_by_region = _employees(con, rng)
    customers = _customers(con, rng)
    prices = _products(con, rng)
    _orders(con, rng, customers, reps_by_region, prices)


def _person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)


def _employees(con: sqlite3.Connection, rng: random.Random) -> dict[int, list[int]]:
    rows: list[tuple[object, ...]] = []

    def add(
        title: str,
        manager: int | None,
        region: int | None,
        salary: tuple[int, int],
        hired: tuple[dt.date, dt.date],
    ) -> int:
        employee_id = len(rows) + 1
        first, last = _person(rng)
        rows.append(
            (
                employee_id,
                first,
                last,
                _email(first, last, employee_id, "sqlgate-retail.com"),
                title,
                _day(*hired, rng).isoformat(),
                float(rng.randrange(*salary, 500)),
                manager,
                region,
            )
        )
        return employee_id

    ceo = add(
        "Chief Executive Officer",
        None,
        None,
        (210_000, 260_000),
        (dt.date(2015, 3, 1), dt.date(2016, 6, 1)),
    )
    vp = add(
        "VP of Sales", ceo, None, (160_000, 190_000), (dt.date(2016, 1, 1), dt.date(2018, 1, 1))
    )
    reps_by_region: dict[int, list[int]] = {}
    for region_id, (name, _, _) in enumerate(REGIONS, start=1):
        manager = add(
            f"Regional Sales Manager, {name}",
            vp,
            region_id,
            (105_000, 135_000),
            (dt.date(2017, 1, 1), dt.date(2021, 1, 1)),
        )
        reps_by_region[region_id] = [
            add(
                rng.choice(
                    ("Sales Representative", "Sales Representative", "Senior Sales Representative")
                ),
                manager,
                region_id,
                (52_000, 88_000),
                (dt.date(2019, 1, 1), dt.date(2024, 6, 30)),
            )
            for _ in range(rng.randint(4, 7) if REGION_WEIGHTS[region_id - 1] > 10 else 3)
        ]
    con.executemany("INSERT INTO employees VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return reps_by_region


def _customers(
    con: sqlite3.Connection, rng: random.Random
) -> list[tuple[int, int, dt.date, float]]:
    """Insert customers; return (customer_id, region_id, signup_date, buying weight) per customer."""
    rows = []
    out = []
    for customer_id in range(1, N_CUSTOMERS + 1):
        first, last = _person(rng)
        region_id = rng.choices(range(1, len(REGIONS) + 1), weights=REGION_WEIGHTS)[0]
        city = rng.choice(REGIONS[region_id - 1][2])
        segment = _weighted(rng, SEGMENTS)
        signup = _day(dt.date(2021, 1, 1), dt.date(2025, 9, 30), rng)
        rows.append(
            (
                customer_id,
                first,
                last,
                _email(first, last, customer_id, "example.com"),
                city,
                region_id,
                segment,
                signup.isoformat(),
            )
        )
        weight = rng.paretovariate(1.6) * SEGMENT_WEIGHTS[str(segment)]
        out.append((customer_id, region_id, signup, weight))
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return out


SEGMENT_WEIGHTS = {"Consumer": 1.0, "Small Business": 1.8, "Enterprise": 3.0}


def _products(con: sqlite3.Connection, rng: random.Random) -> list[tuple[int, float, float]]:
    """Insert categories and products; return (product_id, price, popularity) per product."""
    con.executemany(
        "INSERT INTO categories VALUES (?, ?, ?)",
        [(i, name, description) for i, (name, description, _, _) in enumerate(CATEGORIES, start=1)],
    )
    rows: list[tuple[object, ...]] = []
    out = []
    seen: set[str] = set()
    for category_id, (name, _, (low, high), nouns) in enumerate(CATEGORIES, start=1):
        for _ in range(PRODUCTS_PER_CATEGORY):
            while True:
                product_name = f"{rng.choice(BRANDS)} {rng.choice(nouns)}"
                if product_name not in seen:
                    seen.add(product_name)
                    break
            product_id = len(rows) + 1
            # log-uniform prices end in .99 or .49, like a real catalogue
            price = float(int(low * (high / low) ** rng.random())) + rng.choice((0.99, 0.99, 0.49))
            cost = _money(price * rng.uniform(0.42, 0.68))
            sku = f"{name[:3].upper()}-{product_id:04d}"
            rows.append(
                (
                    product_id,
                    product_name,
                    sku,
                    category_id,
                    _money(price),
                    cost,
                    int(rng.random() < 0.06),
                )
            )
            out.append((product_id, _money(price), rng.paretovariate(2.0)))
    con.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return out


def _order_day(rng: random.Random) -> dt.date:
    # Busier in November/December and growing from 2024 to 2025.
    while True:
        day = _day(FIRST_DAY, LAST_DAY, rng)
        weight = (1.0 + 0.25 * (day.year - 2024)) * (1.6 if day.month in (11, 12) else 1.0)
        if rng.random() < weight / 2.0:
            return day


def _orders(
    con: sqlite3.Connection,
    rng: random.Random,
    customers: list[tuple[int, int, dt.date, float]],
    reps_by_region: dict[int, list[int]],
    products: list[tuple[int, float, float]],
) -> None:
    weights = [w for *_, w in customers]
    drafts: list[tuple[dt.date, int, int]] = []
    while len(drafts) < N_ORDERS:
        customer_id, region_id, signup, _ = rng.choices(customers, weights=weights)[0]
        day = _order_day(rng)
        if day < signup:
            continue
        drafts.append((day, customer_id, region_id))
    drafts.sort(key=lambda d: (d[0], d[1]))

    order_rows: list[tuple[object, ...]] = []
    item_rows: list[tuple[object, ...]] = []
    product_weights = [p for *_, p in products]
    for order_id, (day, customer_id, region_id) in enumerate(drafts, start=1):
        # web orders have no sales representative
        employee_id = rng.choice(reps_by_region[region_id]) if rng.random() < 0.7 else None
        age = (LAST_DAY - day).days
        if age < 6:
            status = "shipped"
        else:
            status = _weighted(rng, (("delivered", 88), ("cancelled", 7), ("returned", 5)))
        shipped = (
            None
            if status == "cancelled"
            else (day + dt.timedelta(days=rng.randint(1, 4))).isoformat()
        )
        order_rows.append((order_id, customer_id, employee_id, day.isoformat(), shipped, status))
        lines = rng.choices((1, 2, 3, 4, 5), weights=(24, 27, 22, 15, 12))[0]
        for product_id, price, _ in {
            p[0]: p for p in rng.choices(products, weights=product_weights, k=lines)
        }.values():
            quantity = rng.choices((1, 2, 3, 4, 5, 10), weights=(60, 20, 9, 5, 4, 2))[0]
            item_rows.append(
                (
                    len(item_rows) + 1,
                    order_id,
                    product_id,
                    quantity,
                    price,
                    _weighted(rng, DISCOUNTS),
                )
            )
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", order_rows)
    con.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?, ?, ?)", item_rows)
