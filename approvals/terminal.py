"""The interactive reviewer: every pending statement shown once, then one answer per item.

Answers: ``a`` approve, ``r`` reject (asks for a reason), ``e`` edit (reads SQL up to an empty
line), ``A`` approve this and every remaining item. Ctrl-C or end of input cancels the whole
review with ``ApprovalCancelled``: nothing is decided, nothing runs. Input comes through an
injectable function, so the prompt is testable without a terminal.

Everything shown comes from the asker or the model, so it is shown through
``approvals.terminal_text``: control characters, ANSI sequences and bidi overrides are made
visible, never interpreted (the default console does it to everything it prints, and the
fields are made visible here too, whatever console a caller passes).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from .decisions import Validate, refusal_text
from .errors import ApprovalCancelled
from .models import ApprovalBatch, ApprovalItem, Approve, Edit, Reject
from .risk import StatementRisk
from .terminal_text import terminal_console, visible

_CHOICES = "[a]pprove / [r]eject / [e]dit / [A]pprove all remaining"


class TerminalReviewer:
    """Review a batch at the terminal with rich.

    ``input(prompt) -> str`` defaults to ``console.input``. ``validate``, when given, checks an
    edit at once so the reviewer can correct it; the gate validates it again regardless.
    """

    def __init__(
        self,
        console: Console | None = None,
        input: Callable[[str], str] | None = None,
        *,
        validate: Validate | None = None,
        theme: str = "ansi_dark",
    ) -> None:
        self.console = console if console is not None else terminal_console()
        self.input = input if input is not None else self._console_input
        self.validate = validate
        self.theme = theme

    def _console_input(self, prompt: str) -> str:
        return self.console.input(escape(prompt))

    def __call__(self, batch: ApprovalBatch) -> dict[str, Approve | Reject | Edit]:
        try:
            self.show(batch)
            return self._ask_all(batch)
        except (KeyboardInterrupt, EOFError) as exc:
            self.console.print("[yellow]Review cancelled: nothing was approved, nothing runs.[/]")
            raise ApprovalCancelled(f"review of {batch.batch_id} cancelled") from exc

    # -- display ---------------------------------------------------------------------------
    def show(self, batch: ApprovalBatch) -> None:
        """Print the batch: every pending item once, then what was denied or auto-approved."""
        pending = batch.pending
        self.console.rule(
            escape(
                visible(
                    f"Approval cycle {batch.cycle} · {len(pending)} statement(s) need approval · "
                    f"{batch.batch_id}"
                )
            )
        )
        for number, item in enumerate(pending, 1):
            self.console.print(self._panel(item, f"{number}/{len(pending)} {item.call_id}", "cyan"))
        for item in batch.denied:
            note = batch.notes.get(item.call_id, "refused by the validator")
            self.console.print(
                self._panel(item, f"DENIED, not approvable · {item.call_id}", "red", note)
            )
        for item in batch.auto_approved:
            note = batch.notes.get(item.call_id, "auto-approved by policy")
            self.console.print(
                Text(
                    visible(f"auto-approved {item.call_id} ({item.question_id}): {note}"),
                    style="dim",
                )
            )

    def _panel(self, item: ApprovalItem, title: str, colour: str, note: str | None = None) -> Panel:
        parts: list = [
            Text(visible(f"Question ({item.question_id}): {item.question}"), style="bold")
        ]
        parts.append(
            Syntax(
                visible(item.sql),
                "sql",
                theme=self.theme,
                word_wrap=True,
                background_color="default",
            )
        )
        if item.risk is not None:
            parts.extend(risk_lines(item.risk))
        if note and note not in {f"{f.code}: {f.message}" for f in item.findings}:
            parts.append(Text(visible(note), style=colour))
        for finding in item.findings:
            line = f"• [{finding.severity}] {finding.code}: {finding.message}"
            parts.append(Text(visible(line), style="yellow"))
        return Panel(
            Group(*parts), title=escape(visible(title)), title_align="left", border_style=colour
        )

    # -- questions -------------------------------------------------------------------------
    def _ask_all(self, batch: ApprovalBatch) -> dict[str, Approve | Reject | Edit]:
        decisions: dict[str, Approve | Reject | Edit] = {}
        pending = batch.pending
        for index, item in enumerate(pending):
            decision = self._ask(item)
            if decision is None:  # "A": approve this one and the rest
                for rest in pending[index:]:
                    decisions[rest.call_id] = Approve()
                break
            decisions[item.call_id] = decision
        counts = {
            kind: sum(1 for d in decisions.values() if d.action == kind)
            for kind in ("approve", "reject", "edit")
        }
        self.console.print(
            f"Decided {len(decisions)}: {counts['approve']} approved, {counts['reject']} rejected, "
            f"{counts['edit']} edited."
        )
        return decisions

    def _ask(self, item: ApprovalItem) -> Approve | Reject | Edit | None:
        while True:
            answer = self.input(
                visible(f"{item.call_id} ({item.question_id}) {_CHOICES}: ")
            ).strip()
            if answer == "A":
                return None
            choice = answer.lower()
            if choice in ("a", "approve", "y", "yes"):
                return Approve()
            if choice in ("r", "reject", "n", "no"):
                return Reject(reason=self._reason())
            if choice in ("e", "edit"):
                edited = self._edit(item)
                if edited is not None:
                    return edited
                continue
            self.console.print("[red]Please answer a, r, e or A.[/]")

    def _reason(self) -> str:
        while True:
            reason = self.input("Reason for rejecting: ").strip()
            if reason:
                return reason
            self.console.print("[red]A rejection needs a reason.[/]")

    def _edit(self, item: ApprovalItem) -> Edit | None:
        self.console.print("New SQL (finish with an empty line):")
        lines: list[str] = []
        while True:
            line = self.input("")
            if not line.strip():
                break
            lines.append(line)
        sql = "\n".join(lines).strip()
        if not sql:
            self.console.print("[red]No SQL entered; the item is still undecided.[/]")
            return None
        if self.validate is not None:
            result = self.validate(sql)
            if not result.ok:
                self.console.print(
                    f"[red]Edited SQL refused: {escape(visible(refusal_text(result)))}[/]"
                )
                return None
            if result.sql and result.sql != sql:
                self.console.print("What will run after validation:")
                self.console.print(
                    Syntax(visible(result.sql), "sql", theme=self.theme, background_color="default")
                )
        return Edit(sql=sql)


_RISK_STYLE = {"low": "green", "medium": "yellow", "high": "bold red"}


def risk_lines(risk: StatementRisk) -> list[Text]:
    """The risk of one statement for a terminal: level and reasons, then the planner's estimate."""
    lines = [Text(f"risk: {risk.summary()}", style=_RISK_STYLE.get(risk.level, "yellow"))]
    facts = []
    if risk.estimate_error:
        facts.append(f"no estimate ({risk.estimate_error})")
    elif risk.estimate:
        facts.append(f"estimate ({risk.engine}): {risk.estimate}")
    facts.append(
        "rows expected: unknown"
        if risk.rows_expected is None
        else f"rows expected: ~{risk.rows_expected}"
    )
    if risk.row_cap is not None:
        cut = {True: "will cut", False: "will not cut", None: "may cut"}[risk.row_cap_cuts]
        facts.append(f"row cap {risk.row_cap} {cut}")
    if risk.tables:
        facts.append(f"reads {', '.join(risk.tables)}")
    if risk.sensitive_columns:
        facts.append(f"sensitive: {', '.join(risk.sensitive_columns)}")
    lines.append(Text(" · ".join(facts), style="dim"))
    return lines
