"""A plugin's source as the hub keeps it: LF line endings and one final newline, however it was typed."""

from __future__ import annotations


def normalised_source(text: str) -> str:
    """`text` with CRLF and lone CR turned into LF, ending in a newline (a blank source stays blank).

    A browser's form posts CRLF and editors differ on the last newline; without this, the same code
    saved from the admin, the API and a file would hash differently and every line would diff."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if not text.strip() or text.endswith("\n") else text + "\n"
