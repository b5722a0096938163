"""Add pages take initial values from the query (`?account=3`); one a field cannot read is left out, not a 500."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import FieldDoesNotExist, ValidationError


def _readable(model, name: str, value) -> bool:
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return True   # not a model field: the form ignores it
    target = field.target_field if field.is_relation and not field.many_to_many and field.concrete else field
    if field.many_to_many:
        target = field.target_field
        values = value.split(",") if isinstance(value, str) else list(value)
    else:
        values = [value]
    try:
        for one in values:
            target.to_python(one)
    except (ValidationError, ValueError, TypeError):
        return False
    return True


def guard(site: admin.AdminSite) -> None:
    """Wraps each registered admin's get_changeform_initial_data (Django's, Celery beat's and the hub's):
    `?clocked_time=<markup>` or `?account=<markup>` on an add page answered 500 before."""
    for model_admin in site._registry.values():
        read = model_admin.get_changeform_initial_data

        def initial(request, read=read, model=model_admin.model):
            return {name: value for name, value in read(request).items() if _readable(model, name, value)}
        model_admin.get_changeform_initial_data = initial   # type: ignore[method-assign]  # this instance's only
