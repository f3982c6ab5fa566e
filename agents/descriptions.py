"""Table and column descriptions from a file, for databases whose catalogue has none.

Three formats are read, chosen by the file's content:

- sqlgate's own YAML::

      tables:
        client:
          description: Bank clients, the people who hold accounts and borrow
          columns:
            gender: F female, M male
            birth_date: {description: date of birth}

- a dbt ``schema.yml`` (``models:``, ``sources:`` with their ``tables:``, ``seeds:``,
  ``snapshots:``; each with ``name``, ``description`` and ``columns``);
- a dbt ``manifest.json`` (``nodes`` and ``sources``; a node's ``alias`` or a source's
  ``identifier`` is the table's name in the database).

Names are matched without regard to case; entries for tables the database does not have are
ignored. A description is added to what the database itself says (``COMMENT``), never in its
place. A malformed file is one ``DescriptionsError`` naming the file and the key.

Example:
    >>> from agents.schema_models import ColumnInfo, TableInfo
    >>> found = Descriptions.from_data({"tables": {"Client": {"description": "bank customers",
    ...                                  "columns": {"A11": "average salary"}}}})
    >>> table = TableInfo(name="client", columns=[ColumnInfo(name="a11", type="INTEGER")])
    >>> described = found.apply({"client": table})["client"]
    >>> described.comment, described.columns[0].comment
    ('bank customers', 'average salary')
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agents.errors import DescriptionsError
from agents.schema_models import TableInfo

__all__ = ["Descriptions", "TableDescription", "load_descriptions"]

#: A description is cut to this many characters: it is indexed and may be shown in prompts.
MAX_DESCRIPTION_CHARS = 300


class TableDescription(BaseModel):
    """What a file says about one table."""

    description: str | None = Field(default=None, description="The table's description")
    columns: dict[str, str] = Field(
        default_factory=dict, description="Lower-cased column name -> its description"
    )


class Descriptions(BaseModel):
    """Descriptions by lower-cased table name, and a fingerprint of where they came from."""

    tables: dict[str, TableDescription] = Field(default_factory=dict)
    source: str = Field(default="", description="The file read, for messages")

    @classmethod
    def from_data(cls, data: object, source: str = "descriptions") -> Descriptions:
        """Descriptions from parsed YAML/JSON in any of the three formats."""
        if not isinstance(data, dict):
            raise DescriptionsError(f"{source}: expected a mapping at the top level")
        found: dict[str, TableDescription] = {}
        if "nodes" in data or ("sources" in data and isinstance(data["sources"], dict)):
            _manifest(data, found, source)
        elif any(key in data for key in ("models", "sources", "seeds", "snapshots")):
            _dbt_schema(data, found, source)
        elif "tables" in data:
            _own(data["tables"], found, source)
        else:
            raise DescriptionsError(
                f"{source}: no 'tables' (sqlgate), 'models'/'sources' (dbt schema.yml) or "
                "'nodes' (dbt manifest.json) key"
            )
        return cls(tables=found, source=source)

    def fingerprint(self) -> str:
        """Changes when any description changes (the schema cache is keyed by it)."""
        text = json.dumps(self.model_dump(exclude={"source"}), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def apply(self, tables: Mapping[str, TableInfo]) -> dict[str, TableInfo]:
        """Copies of ``tables`` whose comments also carry the file's descriptions."""
        out: dict[str, TableInfo] = {}
        for name, info in tables.items():
            described = self.tables.get(name.lower())
            if described is None:
                out[name] = info
                continue
            columns = [
                column.model_copy(
                    update={
                        "comment": _joined(
                            column.comment, described.columns.get(column.name.lower())
                        )
                    }
                )
                for column in info.columns
            ]
            out[name] = info.model_copy(
                update={"comment": _joined(info.comment, described.description), "columns": columns}
            )
        return out


def load_descriptions(path: str | Path) -> Descriptions:
    """The descriptions in ``path`` (YAML, dbt ``schema.yml`` or dbt ``manifest.json``)."""
    import yaml  # only when a descriptions file is given

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise DescriptionsError(f"cannot read descriptions file {file}: {exc.strerror}") from None
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DescriptionsError(f"{file}: not valid {file.suffix or 'YAML'} ({first})") from None
    return Descriptions.from_data(data, str(file))


def _text(value: Any, where: str, source: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get("description")
        if value is None:
            return None
    if not isinstance(value, str | int | float):
        raise DescriptionsError(f"{source}: {where} must be a text")
    text = " ".join(str(value).split())
    return text[:MAX_DESCRIPTION_CHARS] or None


def _columns(value: Any, where: str, source: str) -> dict[str, str]:
    """``{name: text}`` or dbt's ``[{name, description}]`` / ``{name: {description}}``."""
    out: dict[str, str] = {}
    if value is None:
        return out
    if isinstance(value, list):
        pairs = []
        for i, entry in enumerate(value):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise DescriptionsError(f"{source}: {where}.columns[{i}] needs a 'name'")
            pairs.append((entry["name"], entry))
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:
        raise DescriptionsError(f"{source}: {where}.columns must be a mapping or a list")
    for name, entry in pairs:
        text = _text(entry, f"{where}.columns.{name}", source)
        if text:
            out[str(name).lower()] = text
    return out


def _put(found: dict[str, TableDescription], name: str, description: Any, columns: Any,
         where: str, source: str) -> None:  # fmt: skip
    entry = TableDescription(
        description=_text(description, f"{where}.description", source),
        columns=_columns(columns, where, source),
    )
    if entry.description or entry.columns:
        found[name.lower()] = entry


def _own(tables: Any, found: dict[str, TableDescription], source: str) -> None:
    if not isinstance(tables, dict):
        raise DescriptionsError(f"{source}: 'tables' must map table names to descriptions")
    for name, entry in tables.items():
        where = f"tables.{name}"
        if isinstance(entry, str) or entry is None:
            _put(found, str(name), entry, None, where, source)
        elif isinstance(entry, dict):
            _put(found, str(name), entry.get("description"), entry.get("columns"), where, source)
        else:
            raise DescriptionsError(f"{source}: {where} must be a text or a mapping")


def _dbt_schema(data: dict[str, Any], found: dict[str, TableDescription], source: str) -> None:
    for key in ("models", "seeds", "snapshots"):
        for i, model in enumerate(data.get(key) or []):
            where = f"{key}[{i}]"
            if not isinstance(model, dict) or not isinstance(model.get("name"), str):
                raise DescriptionsError(f"{source}: {where} needs a 'name'")
            name = (model.get("config") or {}).get("alias") or model["name"]
            _put(found, name, model.get("description"), model.get("columns"), where, source)
    for i, group in enumerate(data.get("sources") or []):
        if not isinstance(group, dict):
            raise DescriptionsError(f"{source}: sources[{i}] must be a mapping")
        for j, table in enumerate(group.get("tables") or []):
            where = f"sources[{i}].tables[{j}]"
            if not isinstance(table, dict) or not isinstance(table.get("name"), str):
                raise DescriptionsError(f"{source}: {where} needs a 'name'")
            name = table.get("identifier") or table["name"]
            _put(found, name, table.get("description"), table.get("columns"), where, source)


def _manifest(data: dict[str, Any], found: dict[str, TableDescription], source: str) -> None:
    for key in ("nodes", "sources"):
        entries = data.get(key) or {}
        if not isinstance(entries, dict):
            raise DescriptionsError(f"{source}: '{key}' must map ids to entries")
        for unique_id, node in entries.items():
            where = f"{key}.{unique_id}"
            if not isinstance(node, dict):
                raise DescriptionsError(f"{source}: {where} must be a mapping")
            if key == "nodes" and node.get("resource_type") not in ("model", "seed", "snapshot"):
                continue
            name = node.get("alias") or node.get("identifier") or node.get("name")
            if not isinstance(name, str):
                raise DescriptionsError(f"{source}: {where} needs a 'name'")
            _put(found, name, node.get("description"), node.get("columns"), where, source)


def _joined(own: str | None, extra: str | None) -> str | None:
    if not extra or (own and extra.casefold() in own.casefold()):
        return own
    return f"{own}; {extra}" if own else extra
