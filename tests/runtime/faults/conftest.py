"""The runtime's fault tests end with a table of what each silent-engine scenario cost."""

from .figures import FIGURES


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    keys = list(dict.fromkeys(k for row in FIGURES for k in row))
    terminalreporter.section("silent engine figures")
    terminalreporter.write_line(" | ".join(keys))
    for row in FIGURES:
        terminalreporter.write_line(" | ".join(str(row.get(k, "")) for k in keys))
