"""Plain data the linter produces: a finding on one source line, and a file it could not check."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Violation:
    path: str  # as given / relative to the working directory, with forward slashes
    line: int  # 1-based
    col: int  # 1-based
    rule: str  # "PK101"
    category: str  # sync | alloc | loop | timing | stream
    message: str
    severity: str  # "warning" | "error"
    end_line: int = 0
    end_col: int = 0
    source: str = ""  # the stripped source line (baseline fingerprint, text output)
    confidence: str = "high"  # high | medium | low (SARIF rank 90 / 60 / 30)

    def to_json(self) -> dict:
        """path, line, col, rule, category, message, severity, confidence."""
        d = asdict(self)
        return {k: d[k] for k in ("path", "line", "col", "rule", "category", "message", "severity", "confidence")}

    def sort_key(self):
        return (self.path, self.line, self.col, self.rule)


@dataclass(frozen=True)
class FileError:
    """A file that could not be checked (unreadable, undecodable, not Python). The run goes on."""

    path: str
    message: str
    line: int = 0
    col: int = 0

    def __str__(self):
        where = f"{self.path}:{self.line}:{self.col}" if self.line else self.path
        return f"{where}: cannot lint: {self.message}"

    def to_json(self) -> dict:
        """Same keys as a finding's, ``rule`` null and ``category`` "error": the file was not checked."""
        return {"path": self.path, "line": self.line, "col": self.col, "rule": None, "category": "error",
                "message": f"cannot lint: {self.message}", "severity": "error", "confidence": "high"}
