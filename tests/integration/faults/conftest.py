"""`make chaos` (and any run of this suite) ends with a table of what each fault cost."""

from .cluster import FIGURES


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    keys = list(dict.fromkeys(k for row in FIGURES for k in row))
    terminalreporter.section("fault figures")
    terminalreporter.write_line(" | ".join(keys))
    for row in FIGURES:
        terminalreporter.write_line(" | ".join(str(row.get(k, "")) for k in keys))
