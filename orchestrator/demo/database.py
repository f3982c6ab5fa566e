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

from orchestrator.sqlite_file import write_sqlite_atomically

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

SCHEMA = """
CREATE TABLE regions (
    region_id   INTEGER PRIMARY KEY,
    name        VARCHAR(40) NOT NULL UNIQUE,
    country     VARCHAR(40) NOT NULL
);
CREATE TABLE employees (
    employee_id INTEGER PRIMARY KEY,
    first_name  VARCHAR(40) NOT NULL,
    last_name   VARCHAR(40) NOT NULL,
    email       VARCHAR(120) NOT NULL UNIQUE,
    title       VARCHAR(60) NOT NULL,
    hire_date   DATE NOT NULL,
    salary      NUMERIC(10, 2) NOT NULL,
    manager_id  INTEGER REFERENCES employees (employee_id),
    region_id   INTEGER REFERENCES regions (region_id)
);
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    first_name  VARCHAR(40) NOT NULL,
    last_name   VARCHAR(40) NOT NULL,
    email       VARCHAR(120) NOT NULL UNIQUE,
    city        VARCHAR(60) NOT NULL,
    region_id   INTEGER NOT NULL REFERENCES regions (region_id),
    segment     VARCHAR(20) NOT NULL,
    signup_date DATE NOT NULL
);
CREATE TABLE categories (
    category_id INTEGER PRIMARY KEY,
    name        VARCHAR(40) NOT NULL UNIQUE,
    description VARCHAR(200) NOT NULL
);
CREATE TABLE products (
    product_id   INTEGER PRIMARY KEY,
    name         VARCHAR(80) NOT NULL,
    sku          VARCHAR(20) NOT NULL UNIQUE,
    category_id  INTEGER NOT NULL REFERENCES categories (category_id),
    price        NUMERIC(10, 2) NOT NULL,
    cost         NUMERIC(10, 2) NOT NULL,
    discontinued BOOLEAN NOT NULL DEFAULT 0
);
CREATE TABLE orders (
    order_id     INTEGER PRIMARY KEY,
    customer_id  INTEGER NOT NULL REFERENCES customers (customer_id),
    employee_id  INTEGER REFERENCES employees (employee_id),
    order_date   DATE NOT NULL,
    shipped_date DATE,
    status       VARCHAR(20) NOT NULL
        CHECK (status IN ('delivered', 'shipped', 'cancelled', 'returned'))
);
CREATE TABLE order_items (
    order_item_id INTEGER PRIMARY KEY,
    order_id      INTEGER NOT NULL REFERENCES orders (order_id),
    product_id    INTEGER NOT NULL REFERENCES products (product_id),
    quantity      INTEGER NOT NULL CHECK (quantity > 0),
    unit_price    NUMERIC(10, 2) NOT NULL,
    discount      NUMERIC(4, 2) NOT NULL DEFAULT 0
);
CREATE INDEX ix_employees_manager ON employees (manager_id);
CREATE INDEX ix_customers_region ON customers (region_id);
CREATE INDEX ix_products_category ON products (category_id);
CREATE INDEX ix_orders_customer ON orders (customer_id);
CREATE INDEX ix_orders_employee ON orders (employee_id);
CREATE INDEX ix_orders_date ON orders (order_date);
CREATE INDEX ix_order_items_order ON order_items (order_id);
CREATE INDEX ix_order_items_product ON order_items (product_id);
"""

REGIONS: Sequence[tuple[str, str, Sequence[str]]] = (
    (
        "Northeast",
        "United States",
        ("Boston", "New York", "Philadelphia", "Hartford", "Providence", "Albany"),
    ),
    (
        "Southeast",
        "United States",
        ("Atlanta", "Miami", "Charlotte", "Nashville", "Tampa", "Raleigh"),
    ),
    (
        "Midwest",
        "United States",
        ("Chicago", "Detroit", "Minneapolis", "Columbus", "Milwaukee", "St. Louis"),
    ),
    (
        "Southwest",
        "United States",
        ("Phoenix", "Dallas", "Austin", "Houston", "Albuquerque", "Tucson"),
    ),
    (
        "West",
        "United States",
        ("Seattle", "Portland", "San Francisco", "Los Angeles", "San Diego", "Denver"),
    ),
    ("Canada", "Canada", ("Toronto", "Vancouver", "Montreal", "Calgary", "Ottawa", "Halifax")),
)
# Relative share of customers per region, in REGIONS order.
REGION_WEIGHTS = (24, 18, 20, 14, 18, 6)

FIRST_NAMES = (
    "James",
    "Mary",
    "Robert",
    "Patricia",
    "John",
    "Jennifer",
    "Michael",
    "Linda",
    "David",
    "Elizabeth",
    "William",
    "Barbara",
    "Richard",
    "Susan",
    "Joseph",
    "Jessica",
    "Thomas",
    "Sarah",
    "Charles",
    "Karen",
    "Christopher",
    "Lisa",
    "Daniel",
    "Nancy",
    "Matthew",
    "Betty",
    "Anthony",
    "Sandra",
    "Mark",
    "Margaret",
    "Donald",
    "Ashley",
    "Steven",
    "Kimberly",
    "Andrew",
    "Emily",
    "Paul",
    "Donna",
    "Joshua",
    "Michelle",
    "Kenneth",
    "Carol",
    "Kevin",
    "Amanda",
    "Brian",
    "Melissa",
    "George",
    "Deborah",
    "Timothy",
    "Stephanie",
    "Ronald",
    "Rebecca",
    "Jason",
    "Sharon",
    "Edward",
    "Laura",
    "Jeffrey",
    "Cynthia",
    "Ryan",
    "Amy",
    "Jacob",
    "Kathleen",
    "Gary",
    "Angela",
    "Nicholas",
    "Shirley",
    "Eric",
    "Brenda",
    "Jonathan",
    "Emma",
    "Stephen",
    "Anna",
    "Larry",
    "Pamela",
    "Justin",
    "Nicole",
    "Scott",
    "Samantha",
    "Brandon",
    "Katherine",
    "Priya",
    "Wei",
    "Aisha",
    "Mateo",
    "Sofia",
    "Hiroshi",
    "Fatima",
    "Lucas",
    "Chloe",
    "Omar",
    "Isabella",
    "Raj",
    "Mei",
    "Diego",
    "Olivia",
    "Noah",
    "Ava",
    "Liam",
    "Zoe",
    "Ethan",
)
LAST_NAMES = (
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Gonzalez",
    "Wilson",
    "Anderson",
    "Thomas",
    "Taylor",
    "Moore",
    "Jackson",
    "Martin",
    "Lee",
    "Perez",
    "Thompson",
    "White",
    "Harris",
    "Sanchez",
    "Clark",
    "Ramirez",
    "Lewis",
    "Robinson",
    "Walker",
    "Young",
    "Allen",
    "King",
    "Wright",
    "Scott",
    "Torres",
    "Nguyen",
    "Hill",
    "Flores",
    "Green",
    "Adams",
    "Nelson",
    "Baker",
    "Hall",
    "Rivera",
    "Campbell",
    "Mitchell",
    "Carter",
    "Roberts",
    "Patel",
    "Chen",
    "Kim",
    "Singh",
    "Tremblay",
    "Gagnon",
    "Roy",
    "Cote",
    "Murphy",
    "O'Brien",
    "Kowalski",
    "Novak",
    "Schmidt",
    "Fischer",
    "Rossi",
    "Russo",
    "Silva",
    "Costa",
    "Yamamoto",
    "Tanaka",
)

# name, description, (price_low, price_high), product nouns
CATEGORIES: Sequence[tuple[str, str, tuple[float, float], Sequence[str]]] = (
    (
        "Electronics",
        "Headphones, speakers, chargers and small gadgets",
        (19.0, 349.0),
        (
            "Wireless Earbuds",
            "Bluetooth Speaker",
            "USB-C Charger",
            "Noise-Cancelling Headphones",
            "Smart Watch",
            "Power Bank",
            "Webcam",
            "Portable SSD",
        ),
    ),
    (
        "Home & Kitchen",
        "Cookware, small appliances and tableware",
        (9.0, 249.0),
        (
            "Chef's Knife",
            "Cast Iron Skillet",
            "Coffee Grinder",
            "Electric Kettle",
            "Stand Mixer",
            "Dinnerware Set",
            "Cutting Board",
            "French Press",
        ),
    ),
    (
        "Sports & Outdoors",
        "Fitness gear, camping and cycling",
        (12.0, 299.0),
        (
            "Yoga Mat",
            "Camping Tent",
            "Hiking Backpack",
            "Water Bottle",
            "Adjustable Dumbbells",
            "Cycling Helmet",
            "Trekking Poles",
            "Sleeping Bag",
        ),
    ),
    (
        "Books",
        "Fiction, non-fiction and cookbooks",
        (8.0, 45.0),
        (
            "Mystery Novel",
            "Cookbook",
            "Travel Guide",
            "Science Fiction Novel",
            "Biography",
            "Children's Picture Book",
            "History Atlas",
            "Poetry Collection",
        ),
    ),
    (
        "Clothing",
        "Apparel and accessories for every season",
        (14.0, 189.0),
        (
            "Rain Jacket",
            "Wool Sweater",
            "Running Shoes",
            "Denim Jeans",
            "Cotton T-Shirt",
            "Leather Belt",
            "Winter Gloves",
            "Baseball Cap",
        ),
    ),
    (
        "Beauty",
        "Skincare, haircare and fragrance",
        (6.0, 95.0),
        (
            "Face Moisturizer",
            "Shampoo",
            "Sunscreen SPF 50",
            "Lip Balm",
            "Eau de Parfum",
            "Hair Dryer",
            "Body Lotion",
            "Facial Cleanser",
        ),
    ),
    (
        "Toys & Games",
        "Board games, puzzles and building sets",
        (9.0, 129.0),
        (
            "Board Game",
            "1000-Piece Puzzle",
            "Building Blocks Set",
            "Plush Bear",
            "Remote Control Car",
            "Card Game",
            "Science Kit",
            "Wooden Train Set",
        ),
    ),
    (
        "Office Supplies",
        "Paper, pens and desk accessories",
        (3.0, 399.0),
        (
            "Notebook",
            "Gel Pen Pack",
            "Desk Lamp",
            "Ergonomic Chair",
            "Monitor Stand",
            "Stapler",
            "Label Maker",
            "Whiteboard",
        ),
    ),
)
PRODUCTS_PER_CATEGORY = 15
BRANDS = (
    "Acme",
    "Northwind",
    "Contoso",
    "Fabrikam",
    "Litware",
    "Tailspin",
    "Woodgrove",
    "Proseware",
    "Adatum",
    "Lucerne",
    "Wingtip",
    "Alpine",
    "Summit",
    "Harbor",
    "Evergreen",
)

SEGMENTS = (("Consumer", 62), ("Small Business", 28), ("Enterprise", 10))
DISCOUNTS = ((0.0, 70), (0.05, 14), (0.10, 10), (0.15, 4), (0.20, 2))


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
