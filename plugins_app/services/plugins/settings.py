"""Per-installation plugin settings: checking a manifest's schema, validating values, computed keys."""

from __future__ import annotations

import json
import math
import re
import zoneinfo
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from plugins_app.errors import InvalidInput
from plugins_app.runtime.tables.permissions import SECRET_NAME as _SECRET_NAME
from plugins_app.services.engine.tier import get_tier

TYPES = ("string", "integer", "number", "boolean", "string[]", "enum")
# secretName: the value names one of the account's secrets (the plugin writes {{secret.<value>}}, and
# setting it grants that secret to the installation), so a token never sits in plain settings.
FORMATS = {"string": ("time", "timeZone", "secretName"), "string[]": ("regex",)}
SPEC_KEYS = {"type", "default", "description", "choices", "required", "format", "offsets",
             "minimum", "maximum", "maxLength", "maxItems"}
MAX_STRING = 1000
MAX_ITEMS = 50
MAX_REGEX = 500
OFFSET_YEARS = 11          # this year and the next ten; sync_catalog refreshes the table
TIME = re.compile(r"(?:[01]\d|2[0-3]):[0-5]\d")
NOT_ZONES = {"localtime", "posixrules", "Factory"}
SECRET_NAME = re.compile(_SECRET_NAME)


class ManifestError(ValueError):
    """An official plugin's manifest is malformed (a bug in the catalog, not bad input)."""


def check_schema(slug: str, schema) -> None:
    """Raise ManifestError unless `schema` is a well-formed settings schema with valid defaults."""
    if not isinstance(schema, dict):
        raise ManifestError(f"{slug}: settings must be an object")
    for key, spec in schema.items():
        where = f"{slug}: settings.{key}"
        if not isinstance(spec, dict) or spec.get("type") not in TYPES:
            raise ManifestError(f"{where}: type must be one of {', '.join(TYPES)}")
        unknown = set(spec) - SPEC_KEYS
        if unknown:
            raise ManifestError(f"{where}: unknown keys {sorted(unknown)}")
        choices = spec.get("choices")
        if (spec["type"] == "enum" or choices is not None) and (
                not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices)):
            raise ManifestError(f"{where}: choices must be a non-empty array of strings")
        if "format" in spec and spec["format"] not in FORMATS.get(spec["type"], ()):
            raise ManifestError(f"{where}: format {spec['format']!r} does not apply to {spec['type']}")
        if "offsets" in spec and (spec.get("format") != "timeZone" or spec["offsets"] in schema):
            raise ManifestError(f"{where}: offsets names a new key and needs format timeZone")
        if not isinstance(spec.get("description", ""), str) or not isinstance(spec.get("required", False), bool):
            raise ManifestError(f"{where}: description must be a string and required a boolean")
        if "default" in spec:
            try:
                _clean_value(key, spec, spec["default"])
            except InvalidInput as exc:
                raise ManifestError(f"{where}: the default is invalid: {exc.detail}") from None
        elif not spec.get("required"):
            raise ManifestError(f"{where}: an optional setting needs a default")


def defaults(schema: dict) -> dict:
    return {key: spec["default"] for key, spec in schema.items() if "default" in spec}


def computed_keys(schema: dict) -> set[str]:
    return {spec["offsets"] for spec in schema.values() if "offsets" in spec}


def clean_patch(slug: str, schema: dict, values) -> dict:
    """Validate the settings a request sends; `None` resets a key to its default. Computed keys
    are ignored, so what GET answers can be sent back unchanged."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise InvalidInput("settings", "expected an object of setting name to value")
    clean = {}
    for key, value in values.items():
        if key in computed_keys(schema):
            continue
        spec = schema.get(key)
        if spec is None:
            takes = ", ".join(schema) or "no settings"
            raise InvalidInput(f"settings.{key}", f"{slug} has no such setting (it takes: {takes})")
        clean[key] = None if value is None else _clean_value(key, spec, value)
    _check_regexes(schema, clean)
    return clean


def merge(slug: str, schema: dict, current: dict | None, patch: dict) -> dict:
    """Apply a cleaned patch to an installation's settings; fill defaults, check required keys,
    drop keys the schema no longer has and recompute the computed ones."""
    current = current or {}
    merged = defaults(schema)
    for key, spec in schema.items():
        if key in current and _valid(key, spec, current[key]):
            merged[key] = current[key]
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
            if "default" in schema[key]:
                merged[key] = schema[key]["default"]
        else:
            merged[key] = value
    missing = [key for key, spec in schema.items() if spec.get("required") and key not in merged]
    if missing:
        raise InvalidInput(f"settings.{missing[0]}", f"{slug} needs this setting")
    for key, spec in schema.items():
        if "offsets" in spec:
            merged[spec["offsets"]] = utc_offsets(merged[key], datetime.now(UTC).year)
    return merged


def _valid(key: str, spec: dict, value) -> bool:
    try:
        _clean_value(key, spec, value)
    except InvalidInput:
        return False
    return True


def _clean_value(key: str, spec: dict, value):
    field, kind = f"settings.{key}", spec["type"]
    if kind == "boolean":
        if not isinstance(value, bool):
            raise InvalidInput(field, "expected true or false")
        return value
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or (kind == "integer" and not float(value).is_integer()):
            raise InvalidInput(field, f"expected {'an integer' if kind == 'integer' else 'a number'}")
        if "minimum" in spec and value < spec["minimum"] or "maximum" in spec and value > spec["maximum"]:
            raise InvalidInput(field, f"expected a value from {spec.get('minimum', '-inf')} "
                                      f"to {spec.get('maximum', 'inf')}")
        return int(value) if kind == "integer" else value
    if kind == "enum":
        if value not in spec["choices"]:
            raise InvalidInput(field, f"expected one of: {', '.join(spec['choices'])}")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise InvalidInput(field, "expected a string")
        _check_string(field, spec, value, spec.get("maxLength", MAX_STRING))
        return value
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(field, "expected an array of strings")
    if len(value) > spec.get("maxItems", MAX_ITEMS):
        raise InvalidInput(field, f"at most {spec.get('maxItems', MAX_ITEMS)} items")
    for i, item in enumerate(value):
        if spec.get("choices") and item not in spec["choices"]:
            raise InvalidInput(field, f"item {i}: {item!r} is not one of: {', '.join(spec['choices'])}")
        _check_string(field, spec, item, MAX_REGEX if spec.get("format") == "regex" else MAX_STRING, i)
    return list(value)


def _check_string(field: str, spec: dict, value: str, limit: int, index: int | None = None) -> None:
    where = "" if index is None else f"item {index}: "
    if len(value) > limit:
        raise InvalidInput(field, f"{where}over {limit} characters")
    fmt = spec.get("format")
    if fmt == "time" and not TIME.fullmatch(value):
        raise InvalidInput(field, f"{where}expected a 24-hour time HH:MM, got {value!r}")
    if fmt == "timeZone" and value not in _zones():
        raise InvalidInput(field, f"{where}{value!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)")
    if fmt == "regex" and not value:
        raise InvalidInput(field, f"{where}an empty pattern would match everywhere")
    if fmt == "secretName" and value and not SECRET_NAME.fullmatch(value):
        raise InvalidInput(field, f"{where}expected the name of one of the account's secrets (e.g. SLACK_TOKEN), "
                                  "not its value")


def secret_references(schema: dict, values: dict) -> list[str]:
    """The secrets an installation's settings name (settings of format secretName that are set)."""
    return sorted({values[key] for key, spec in schema.items()
                   if spec.get("format") == "secretName" and isinstance(values.get(key), str) and values[key]})


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones() - NOT_ZONES)


def _check_regexes(schema: dict, values: dict) -> None:
    """Compile regex settings in a real engine: the plugin runs them as JavaScript regexes,
    whose syntax is not Python's."""
    for key, patterns in values.items():
        if schema[key].get("format") != "regex" or not patterns:
            continue
        probe = (f"const sources = {_js_array(patterns)};\n"
                 "sources.forEach((source, i) => {\n"
                 "  try { new RegExp(source, 'g'); }\n"
                 "  catch (e) { throw new Error(`item ${i}: ${e.message}`); }\n"
                 "});\n"
                 "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;\n")
        result = get_tier().compile(probe, "javascript")
        if result.get("errors"):
            message = result["errors"][0]["message"]
            found = re.search(r"item \d+: .*", message)
            raise InvalidInput(f"settings.{key}", found.group(0) if found else message)


def _js_array(items: list[str]) -> str:
    # JSON is valid JavaScript except for U+2028/U+2029 in older engines; escape them anyway.
    return json.dumps(items).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def utc_offsets(zone: str, year: int) -> list[list[int]]:
    """The zone's UTC offsets from 1 January `year` for OFFSET_YEARS years, as
    [[from_epoch_seconds, offset_seconds], ...]: plugin compartments have no Intl to ask."""
    return [list(pair) for pair in _utc_offsets(zone, year)]


@lru_cache(maxsize=256)
def _utc_offsets(zone: str, year: int) -> tuple[tuple[int, int], ...]:
    tz = zoneinfo.ZoneInfo(zone)
    start = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + OFFSET_YEARS, 1, 1, tzinfo=UTC)

    def offset(at: datetime) -> int:
        delta = at.astimezone(tz).utcoffset()
        assert delta is not None   # an aware datetime always has one
        return int(delta.total_seconds())

    table = [(int(start.timestamp()), offset(start))]
    step = timedelta(hours=6)
    at = start
    while at < end:
        nxt = at + step
        if offset(nxt) != table[-1][1]:
            lo, hi = at, nxt    # offset(lo) is the old offset, offset(hi) the new one
            while hi - lo > timedelta(seconds=1):
                mid = lo + (hi - lo) / 2
                lo, hi = (mid, hi) if offset(mid) == offset(lo) else (lo, mid)
            table.append((int(hi.timestamp()), offset(hi)))
        at = nxt
    return tuple(table)
