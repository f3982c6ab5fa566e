"""``sqlgate eval``'s inputs and scoring without a model: eval files (each bad one is exit 2 and
one sentence, nothing written), result comparison, selection, and the ``eval`` extra."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.features.eval.cases import EvalFileError, load_cases, parse_entries
from orchestrator.features.eval.compare import gold_is_ordered, same_result
from orchestrator.interfaces.cli.main import app
from tests.conftest import ROOT

runner = CliRunner()
DEMO_EVAL = ROOT / "tests" / "fixtures" / "eval" / "demo.yaml"


# -- files -----------------------------------------------------------------------------------------


def test_json_jsonl_and_yaml_read_alike(tmp_path: Path) -> None:
    entries = [
        {"id": "a", "question": "How  many\norders?", "gold_sql": "SELECT COUNT(*) FROM orders"},
        {"question": "Regions?", "expected_rows": [["North"], ["South"]], "db": "shop"},
    ]
    (tmp_path / "q.json").write_text(json.dumps({"questions": entries}))
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(e) for e in entries) + "\n\n")
    import yaml

    (tmp_path / "q.yaml").write_text(yaml.safe_dump(entries))
    read = [load_cases(tmp_path / f"q.{ext}") for ext in ("json", "jsonl", "yaml")]
    assert read[0] == read[1] == read[2]
    assert [c.id for c in read[0]] == ["a", "q2"]
    assert read[0][0].question == "How many orders?" and read[0][1].db == "shop"


def test_spider_dev_entries_are_read_as_they_are() -> None:
    spider = [
        {
            "db_id": "concert_singer",
            "query": "SELECT count(*) FROM singer",
            "question": "How many?",
            "query_toks": [],
            "sql": {},
        },
        {"db_id": "pets_1", "query": "SELECT 1", "question": "One?", "question_toks": []},
    ]
    cases = parse_entries(spider, "dev.json")
    assert [(c.id, c.db, c.gold_sql) for c in cases] == [
        ("q1", "concert_singer", "SELECT count(*) FROM singer"),
        ("q2", "pets_1", "SELECT 1"),
    ]


BAD_FILES = [
    ("q.json", '[{"question": ', "is not valid JSON (line 1"),
    ("q.json", '{"rows": []}', "holds no list of questions"),
    ("q.json", "[]", "holds no questions"),
    (
        "q.jsonl",
        '{"question": "a", "gold_sql": "SELECT 1"}\nnot json\n',
        "q.jsonl:2 is not valid JSON",
    ),
    ("q.yaml", "- question: [unclosed\n", "is not valid YAML"),
    ("q.txt", "How many?", "unknown eval file type '.txt'"),
    (
        "q.json",
        '[{"question": "a"}]',
        "entry 1 needs exactly one of 'gold_sql' and 'expected_rows'",
    ),
    ("q.json", '[{"question": "a", "gold_sql": "S", "expected_rows": []}]', "exactly one"),
    ("q.json", '[{"gold_sql": "SELECT 1"}]', "entry 1 has no 'question' text"),
    ("q.json", '[{"question": "a", "gold": "SELECT 1"}]', "unknown key(s) 'gold'"),
    ("q.json", '[{"question": "a", "expected_rows": [1, 2]}]', "is not a list of rows"),
    (
        "q.json",
        '[{"id": "../x", "question": "a", "gold_sql": "SELECT 1"}]',
        "cannot name a cassette file",
    ),
    (
        "q.json",
        '[{"id": "a", "question": "b", "gold_sql": "SELECT 1"}, '
        '{"id": "a", "question": "c", "gold_sql": "SELECT 2"}]',
        "entry 2 repeats the id 'a' of entry 1",
    ),
    ("q.json", '["How many?"]', "entry 1 is not an object"),
    (
        "q.json",
        '[{"question": "a", "gold_sql": "SELECT 1", "ordered": true}]',
        "'ordered' applies to expected_rows",
    ),
]


@pytest.mark.parametrize(("name", "text", "says"), BAD_FILES)
def test_a_bad_eval_file_is_exit_2_and_one_sentence(
    tmp_path: Path, name: str, text: str, says: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(EvalFileError) as caught:
        load_cases(path)
    assert says in caught.value.message
    out = tmp_path / "report.json"
    result = runner.invoke(
        app,
        [
            "eval",
            str(path),
            "--db",
            "sqlite:///x.db",
            "--approve-all",
            "--replay",
            str(tmp_path),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) <= 2 and lines[0].startswith("error:"), result.output  # may wrap once
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--replay", "{tmp}/none"], "no such cassette folder"),
        (
            ["--record", "{tmp}/a", "--replay", "{tmp}/b"],
            "--record and --replay exclude each other",
        ),
        (["--db-id", "nowhere", "--replay", "{tmp}"], "no question left to evaluate"),
        (["--baseline", "{tmp}/none.json", "--replay", "{tmp}"], "no such baseline report"),
        (
            ["--baseline", "{tmp}/junk.json", "--replay", "{tmp}"],
            "is not a report written by sqlgate eval",
        ),
    ],
)
def test_bad_options_are_exit_2_and_one_sentence(
    tmp_path: Path, demo_url: str, args: list[str], says: str
) -> None:
    (tmp_path / "junk.json").write_text('{"accuracy": 1}')
    result = runner.invoke(
        app,
        [
            "eval",
            str(DEMO_EVAL),
            "--db",
            demo_url,
            "--approve-all",
            *[a.replace("{tmp}", str(tmp_path)) for a in args],
        ],
    )
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())


def test_a_question_without_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text(
        json.dumps([{"id": "x1", "question": "a", "gold_sql": "SELECT 1", "db": "shop"}])
    )
    result = runner.invoke(app, ["eval", str(path), "--approve-all", "--replay", str(tmp_path)])
    assert result.exit_code == 2
    assert "question 'x1' names the database 'shop': pass --db-dir" in " ".join(
        result.output.split()
    )


# -- scoring ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("got", "gold", "ordered", "same"),
    [
        ([[1], [2], [2]], [[2], [1], [2]], False, True),
        ([[1], [2]], [[1], [2], [2]], False, False),  # a multiset, not a set
        ([[1], [2]], [[2], [1]], True, False),
        ([[2.0, "a"]], [["a", 2]], False, True),  # columns in another order, 2 == 2.0
        ([[0.1 + 0.2]], [[0.3]], False, True),
        ([[1, 2]], [[1]], False, False),
        ([], [], True, True),
        ([["1"]], [[1]], False, False),  # text is not a number
        ([[None]], [[None]], False, True),
        ([[1, 1], [2, 2]], [[1, 2], [2, 1]], False, False),
    ],
)
def test_results_compare_as_multisets_under_a_column_permutation(
    got: list, gold: list, ordered: bool, same: bool
) -> None:
    assert same_result(got, gold, ordered=ordered) is same


@pytest.mark.parametrize(
    ("sql", "ordered"),
    [
        ("SELECT a FROM t ORDER BY a", True),
        ("SELECT a FROM (SELECT a FROM t ORDER BY a) AS s", False),
        ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1", True),
        ("WITH x AS (SELECT 1 AS a) SELECT a FROM x ORDER BY a", True),
        ("SELECT a FROM t", False),
        ("SELEC nonsense", False),
    ],
)
def test_only_an_outer_order_by_makes_the_order_count(sql: str, ordered: bool) -> None:
    assert gold_is_ordered(sql, "sqlite") is ordered


# -- the eval extra --------------------------------------------------------------------------------


def test_record_without_the_eval_extra_names_it_and_replay_needs_none(
    tmp_path: Path, demo_db: Path
) -> None:
    from tests.test_missing_extras import EVERY_EXTRA, _sqlgate_without

    common = ["eval", str(DEMO_EVAL), "--db", f"sqlite:///{demo_db}", "--approve-all"]
    done = _sqlgate_without("vcr", *common, "--record", str(tmp_path / "c"), tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [
        "error: sqlgate eval --record needs the eval extra, which is not installed: "
        "pip install 'sqlgate[eval]'"
    ]
    replayed = _sqlgate_without(
        EVERY_EXTRA + ",vcr,pytest_recording",
        *common,
        "--replay",
        str(ROOT / "cassettes" / "eval_demo"),
        "--json",
        tmp_path=tmp_path,
        env={"OPENAI_API_KEY": ""},
    )
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert json.loads(replayed.stdout)["totals"]["correct"] == 5


def test_a_database_named_by_the_question_is_found_under_db_dir(
    tmp_path: Path, demo_db: Path
) -> None:
    import shutil

    path = tmp_path / "q.json"
    path.write_text(
        json.dumps(
            [
                {
                    "id": "books",
                    "question": "How many products are in the Books category?",
                    "expected_rows": [[15]],
                    "db": "shop",
                }
            ]
        )
    )
    cassettes = str(ROOT / "cassettes" / "eval_demo")
    args = ["eval", str(path), "--approve-all", "--replay", cassettes, "--db-dir"]
    missing = runner.invoke(app, [*args, str(tmp_path)])
    assert missing.exit_code == 2
    assert "no database 'shop' in" in " ".join(missing.output.split())
    (tmp_path / "database" / "shop").mkdir(parents=True)
    shutil.copy(demo_db, tmp_path / "database" / "shop" / "shop.sqlite")
    found = runner.invoke(app, [*args, str(tmp_path / "database"), "--json"])
    assert found.exit_code == 0, found.output
    report = json.loads(found.stdout)
    assert [q["outcome"] for q in report["questions"]] == ["correct"]
    assert report["questions"][0]["db"].endswith("shop/shop.sqlite")
