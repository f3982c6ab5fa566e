import pytest

from safety import UnsupportedDialect, dialect_for_url


@pytest.mark.parametrize(
    ("url", "dialect"),
    [
        ("sqlite:///x.db", "sqlite"),
        ("sqlite+pysqlite:///x.db", "sqlite"),
        ("postgresql+psycopg://root@127.0.0.1:5432/test", "postgres"),
        ("postgresql://u@h/db", "postgres"),
        ("mysql+pymysql://root@127.0.0.1:3306/test", "mysql"),
        ("mariadb+pymysql://root@h/db", "mysql"),
        ("duckdb:///x.duckdb", "duckdb"),
    ],
)
def test_dialect_for_url(url, dialect):
    assert dialect_for_url(url) == dialect


def test_unknown_scheme_is_an_error_with_a_code():
    with pytest.raises(UnsupportedDialect) as info:
        dialect_for_url("oracle+cx_oracle://u@h/db")
    assert info.value.code == "unsupported_dialect"
