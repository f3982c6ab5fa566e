"""``sqlgate memory ...``: what sqlgate learned from reviews, and how to curate it.

    sqlgate memory add FILE --db URL       seed (question, SQL) pairs from CSV/JSONL; each SQL is
                                           validated and executed once read-only before it is kept
    sqlgate memory list [--db URL]         reviewed examples (--negatives, --all, --notes)
    sqlgate memory show ID                 one example: question, SQL, template, reviewers
    sqlgate memory remove ID [--note]      forget an example (or a note)
    sqlgate memory export                  every example and note as JSON Lines on stdout
    sqlgate memory note TEXT --tables a,b  a business definition, fed to the reasoning step
    sqlgate memory revoke TEMPLATE         earlier approvals of a template no longer earn auto

Memory lives in the state database (``SQLGATE_STATE_URL``, else the state folder's SQLite
file). The acting person is the login name, or the actor of the reviewer token in
``SQLGATE_REVIEWER_TOKEN`` (``orchestrator.interfaces.reviewer_identity``). Every command
that runs questions records and retrieves; ``SQLGATE_MEMORY=off`` turns that off, ``record``
keeps recording but puts nothing into prompts. Earned auto-approval is the policy file's
``[auto_approval]`` section (off by default).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.markup import escape
from rich.text import Text

from approvals.terminal_text import json_text, terminal_console
from orchestrator.core.errors import SqlgateError
from orchestrator.interfaces.cli.common import (
    DbOpt,
    JsonOpt,
    PolicyOpt,
    emit_json,
    err,
    fail,
    policy_with,
)

if TYPE_CHECKING:
    from orchestrator.features.memory import MemoryExample, MemoryStore

memory_app = typer.Typer(
    help="Reviewed-SQL memory: seed, list, show, remove, export, notes, revoke. "
    "Every command that runs questions records and retrieves; SQLGATE_MEMORY=off turns it off, "
    "SQLGATE_MEMORY=record keeps it out of prompts.",
    no_args_is_help=True,
    add_completion=False,
)


def _store() -> MemoryStore:
    from orchestrator.core.state_db import default_state_url
    from orchestrator.features.memory import MemoryStore
    from orchestrator.wiring import state_database

    store = state_database(default_state_url()).store(MemoryStore)
    store.setup()
    return store


def _database_key(db: str | None) -> str | None:
    from orchestrator.core.database import redact_url

    return redact_url(db) if db else None


def _actor(as_json: bool) -> str:
    """The proven acting person (``orchestrator.interfaces.reviewer_identity``), or exit 2 saying why."""
    from orchestrator.interfaces.reviewer_identity import cli_reviewer

    try:
        return cli_reviewer()
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        raise


def _row(e: MemoryExample) -> dict[str, Any]:
    return e.model_dump(mode="json")


@memory_app.command("add")
def add(
    file: Annotated[Path, typer.Argument(help="CSV (question,sql header) or JSON Lines file.")],
    db: DbOpt = None,
    policy: PolicyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Seed memory with (question, SQL) pairs; each is validated and run once read-only first.

    Exit 0 when every pair was accepted, 1 when some were refused (they are not stored).
    """
    from agents import SQLExecutor
    from orchestrator.core.database import TargetDatabase
    from orchestrator.features.memory import ReviewMemory
    from orchestrator.features.memory.hooks import scope_for
    from orchestrator.features.memory.seed import read_pairs, seed_pairs

    try:
        pairs = read_pairs(file)
        # the policy an `ask` with the same --policy validates under
        database = TargetDatabase(db or "", policy=policy_with(policy))
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        return
    outcomes = seed_pairs(
        ReviewMemory(_store()),
        scope_for(database, database.policy),
        pairs,
        validator=database.validator(),
        executor=SQLExecutor(
            database.engine, row_cap=1, redact_errors=database.policy.protects_columns
        ),
        actor=_actor(as_json),
    )
    database.dispose()
    refused = [o for o in outcomes if o.example is None]
    if as_json:
        emit_json(
            [
                {
                    "line": o.pair.line,
                    "question": o.pair.question,
                    "accepted": o.example is not None,
                    "id": o.example.id if o.example else None,
                    "code": o.code,
                    "reason": o.refusal,
                }
                for o in outcomes
            ]
        )
    else:
        for o in outcomes:
            if o.example is not None:
                err.print(f"[green]added[/] {o.example.id}: {o.pair.question}")
            else:
                err.print(f"[red]refused[/] line {o.pair.line} ({o.code}): {o.refusal}")
        err.print(f"{len(outcomes) - len(refused)} added, {len(refused)} refused")
    if refused:
        raise typer.Exit(1)


@memory_app.command("list")
def list_examples(
    db: DbOpt = None,
    negatives: Annotated[bool, typer.Option(help="Rejected statements instead.")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Positives and negatives.")] = False,
    notes: Annotated[bool, typer.Option("--notes", help="Business notes instead.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many rows.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Reviewed examples, newest first (with --notes: the business notes)."""
    store = _store()
    database = _database_key(db)
    if notes:
        found = store.notes(database)
        if as_json:
            emit_json([n.model_dump(mode="json") for n in found])
            return
        for n in found:
            tables = f" [dim](tables: {escape(', '.join(n.tables))})[/]" if n.tables else ""
            terminal_console().print(
                f"{n.id}  {escape(n.text)}{tables}  [dim]{escape(n.database)} by "
                f"{escape(n.author)}[/]"
            )
        if not found:
            terminal_console().print("No business notes.")
        return
    kind: Literal["positive", "negative"] | None = (
        None if all_ else ("negative" if negatives else "positive")
    )
    examples = store.examples(database=database, kind=kind, limit=limit)
    if as_json:
        emit_json([_row(e) for e in examples])
        return
    if not examples:
        terminal_console().print("Memory holds no such examples.")
        return
    from orchestrator.features.render import rows_table

    terminal_console().print(
        rows_table(
            ["id", "status", "template", "question", "reviewers", "recorded"],
            [
                [
                    e.id,
                    e.status,
                    e.template_id[:10],
                    e.question[:60],
                    ", ".join(e.reviewers),
                    e.created_at.strftime("%Y-%m-%d %H:%M"),
                ]
                for e in examples
            ],
        )
    )


@memory_app.command()
def show(
    example_id: Annotated[int, typer.Argument(help="The example id (from `memory list`).")],
    as_json: JsonOpt = False,
) -> None:
    """One example: question, SQL, template, schema and policy fingerprints, reviewers."""
    try:
        e = _store().example(example_id)
    except SqlgateError as exc:
        fail(exc.message, 1, as_json=as_json, error_code=exc.code)
        return
    if as_json:
        emit_json(_row(e))
        return
    from orchestrator.features.render import sql_block

    console = terminal_console()
    console.print(
        f"[bold]example {e.id}[/] ({e.kind}, {e.status}) on {escape(e.database)} ({e.dialect})"
    )
    console.print(Text(f"question: {e.question}"))
    console.print(sql_block(e.sql))
    console.print(Text(f"template {e.template_id}: {e.template_text}"))
    console.print(Text(f"schema {e.schema_fp}, policy {e.policy_fp}; reads {', '.join(e.tables)}"))
    console.print(Text(f"by {', '.join(e.reviewers)} at {e.created_at.isoformat()}"))
    if e.reason:
        console.print(Text(f"reason: {e.reason}"))


@memory_app.command()
def remove(
    item_id: Annotated[int, typer.Argument(help="The example (or, with --note, note) id.")],
    note: Annotated[bool, typer.Option("--note", help="Remove a business note.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Forget one example or note."""
    store = _store()
    try:
        store.remove_note(item_id) if note else store.remove_example(item_id)
    except SqlgateError as exc:
        fail(exc.message, 1, as_json=as_json, error_code=exc.code)
        return
    if as_json:
        emit_json({"removed": item_id, "type": "note" if note else "example"})
    else:
        err.print(f"removed {'note' if note else 'example'} {item_id}")


@memory_app.command()
def export() -> None:
    """Every example and note as JSON Lines on stdout (``{"type": "example" | "note", ...}``)."""
    for row in _store().export():
        sys.stdout.write(json_text(row) + "\n")


@memory_app.command()
def note(
    text: Annotated[str, typer.Argument(help='The definition, e.g. "Revenue means ...".')],
    tables: Annotated[
        str, typer.Option(help="Comma-separated tables it concerns, e.g. orders,order_items.")
    ] = "",
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a business note; the reasoning step sees it for questions that match."""
    from orchestrator.features.memory.store import ANY_DATABASE

    if not text.strip():
        fail("the note is empty", as_json=as_json)
    added = _store().add_note(
        text,
        author=_actor(as_json),
        tables=tables.split(","),
        database=_database_key(db) or ANY_DATABASE,
    )
    if as_json:
        emit_json(added.model_dump(mode="json"))
    else:
        err.print(f"added note {added.id} for {added.database}")


@memory_app.command()
def revoke(
    template: Annotated[str, typer.Argument(help="Template id (or a unique prefix of one).")],
    db: DbOpt = None,
    reason: Annotated[str | None, typer.Option(help="Why, for the record.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a template: statements of it need review again, whatever was approved before."""
    from orchestrator.features.memory.store import ANY_DATABASE

    try:
        revoked = _store().revoke(
            template,
            actor=_actor(as_json),
            database=_database_key(db) or ANY_DATABASE,
            reason=reason,
        )
    except SqlgateError as exc:
        fail(exc.message, 1, as_json=as_json, error_code=exc.code)
        return
    if as_json:
        emit_json(revoked.model_dump(mode="json"))
    else:
        err.print(f"revoked template {revoked.template_id} on {revoked.database}")


def _identity() -> str:
    from approvals import reviewer_identity

    return reviewer_identity()
