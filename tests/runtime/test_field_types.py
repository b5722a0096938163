"""Every field type the hook table uses is defined once and handled by each place that reads it."""

import re

import pytest

from plugins_app.api.schema import context_schema
from plugins_app.runtime.engine import jsassets
from plugins_app.runtime.tables.context import FIELD_TYPES, ContextError, sample_context, validate_context
from plugins_app.runtime.tables.hooks import HOOKS

USED_TYPES = sorted({f.type for spec in HOOKS.values() for f in spec.fields})
MUTABLE_TYPES = sorted({f.type for spec in HOOKS.values() for f in spec.mutable_fields()})


def test_every_type_in_the_hook_table_has_a_definition():
    assert set(USED_TYPES) <= set(FIELD_TYPES)


@pytest.mark.parametrize("type_name", USED_TYPES)
def test_each_type_accepts_its_sample_and_refuses_an_object(type_name):
    field_type = FIELD_TYPES[type_name]
    field_type.check("f", field_type.sample)
    with pytest.raises(ContextError) as refused:
        field_type.check("f", {"not": "a value"})
    assert refused.value.field == "f"


def test_every_hooks_sample_context_passes_its_own_check_and_matches_its_schema():
    for spec in HOOKS.values():
        sample = sample_context(spec)
        assert validate_context(spec, sample) == sample
        schema = context_schema(spec)
        assert set(schema["properties"]) == {f.name for f in spec.fields}
        for f in spec.fields:
            assert {k: v for k, v in schema["properties"][f.name].items() if k not in ("enum", "nullable")} \
                == FIELD_TYPES[f.type].schema


def harness_readers() -> set[str]:
    harness = jsassets.harness_source()
    read_field = harness[harness.index("function readField("):]
    return set(re.findall(r'type === "([^"]+)"', read_field[:read_field.index("\n  }\n")]))


def test_the_harness_reads_every_type_a_handler_may_change():
    for type_name in MUTABLE_TYPES:
        assert FIELD_TYPES[type_name].harness is not None, f"{type_name} fields are not changeable by handlers"


def test_every_harness_reader_the_types_name_exists_in_harness_js():
    named = {t.harness for t in FIELD_TYPES.values() if t.harness}
    assert named == harness_readers()


def test_the_lower_bound_on_a_returned_number_is_the_fields_own():
    bounded = {(spec.name, f.name): f.minimum for spec in HOOKS.values() for f in spec.fields if f.minimum is not None}
    assert bounded == {("notifyScheduled", "delaySeconds"): 0}


@pytest.mark.parametrize(("type_name", "value", "ok"), [
    ("number", 2 ** 53 - 1, True), ("number", -(2 ** 53 - 1), True), ("number", 1e308, False),
    ("number", -1e300, False), ("integer", 2 ** 53 - 1, True), ("integer", 10 ** 30, False),
    ("integer", -(2 ** 53), False),
])
def test_numbers_are_bounded_to_what_a_javascript_number_holds_exactly(type_name, value, ok):
    # Issue 33: 1e308 passed as a delay; every number and integer field now stops at 2**53 - 1.
    check = FIELD_TYPES[type_name].check
    if ok:
        check("field", value)
    else:
        with pytest.raises(ContextError, match="from -9007199254740991 to 9007199254740991"):
            check("field", value)
