"""What a session would lose on Quit, and the question asked before losing it.

A window holding chat answers, load runs or findings asks before it closes (Ctrl+Q is one key away
from Export); one holding nothing closes at once. The question offers Export report first.
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def session_contents(window) -> list[str]:
    """What the session holds that is not saved anywhere, in words ("3 chat answers")."""
    held = []
    run, diagnose, numerics = window.tab("Run"), window.tab("Diagnose"), window.tab("Numerics")
    if run is not None:
        if run.chat.samples:
            held.append(_count(len(run.chat.samples), "chat answer"))
        generator = run.load.generator
        if generator is not None and (generator.stats.completed or generator.running):
            held.append(_count(generator.stats.completed, "load request") + " of a load run")
        if run.controller.busy:
            held.append("a running engine (it will be stopped)")
    findings = len(run.crash_findings) if run is not None else 0
    if diagnose is not None and hasattr(diagnose, "findings"):
        findings = max(findings, len(diagnose.findings.findings()))
    if findings:
        held.append(_count(findings, "diagnosis finding"))
    if numerics is not None and (numerics.last_compare or numerics.last_kernels):
        held.append("numerics results")
    return held


def ask_before_quit(parent: QWidget, held: list[str]) -> QMessageBox:
    """The question (not yet shown): Quit, Export report first, or Cancel."""
    box = QMessageBox(QMessageBox.Icon.Question, "Quit Bring-up Workbench?",
                      "This session holds " + ", ".join(held) + ".\nQuitting loses them unless you export a report.",
                      parent=parent)
    box.quit_button = box.addButton("Quit", QMessageBox.ButtonRole.DestructiveRole)
    box.export_button = box.addButton("Export report first…", QMessageBox.ButtonRole.ActionRole)
    box.cancel_button = box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(box.cancel_button)
    return box
