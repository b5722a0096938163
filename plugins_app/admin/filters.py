"""Changelist filters with inputs: a from/to date range and an exact-match text box."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db import models
from django.utils import timezone
from django.utils.dateparse import parse_date


class _InputFilter(admin.FieldListFilter):
    """Base for filters rendered as a small GET form that keeps the changelist's other parameters."""

    template = "admin/hub/input_filter.html"

    def _value(self, name: str) -> str:
        # FieldListFilter keeps the query string's values of each expected parameter as a list.
        value = self.used_parameters.get(name)
        last = value[-1] if isinstance(value, list) else value
        return last.strip() if isinstance(last, str) else ""

    def inputs(self) -> list[dict]:
        raise NotImplementedError

    def presets(self, changelist) -> list[dict]:
        """One-click values ({label, url, selected}); none by default."""
        return []

    def choices(self, changelist):
        mine = set(self.expected_parameters())
        yield {
            "inputs": self.inputs(),
            "presets": self.presets(changelist),
            "hidden": [(k, v) for k, v in changelist.params.items() if k not in mine],
            "reset_url": changelist.get_query_string(remove=list(mine)),
            "active": any(self._value(name) for name in mine if name),
        }


# The date filters' one-click ranges: (label, days ending today).
PRESETS = (("Today", 1), ("Past 7 days", 7), ("Past 30 days", 30))


class DateRangeFilter(_InputFilter):
    """`<field>__since` and `<field>__until` (inclusive days, YYYY-MM-DD) on a date or date-time."""

    def __init__(self, field, request, params, model, model_admin, field_path):
        self.since_param = f"{field_path}__since"
        self.until_param = f"{field_path}__until"
        super().__init__(field, request, params, model, model_admin, field_path)
        self.title = "date"

    def expected_parameters(self):
        return [self.since_param, self.until_param]

    def inputs(self):
        return [
            # Text, not type=date: a browser's date input shows its locale's order (mm/dd/yyyy in en-US);
            # these filters, the API and the CSV all speak ISO days. The placeholder is the format, not
            # a date: a sample date there read as a filter already applied.
            {"name": self.since_param, "label": "From", "type": "text", "iso_date": True,
             "value": self._value(self.since_param)},
            {"name": self.until_param, "label": "To", "type": "text", "iso_date": True,
             "value": self._value(self.until_param)},
        ]

    def presets(self, changelist):
        """Today, the past 7 and the past 30 days (each ending today, in the site's time zone)."""
        today = timezone.localdate()
        chosen = (self._value(self.since_param), self._value(self.until_param))
        presets = []
        for label, days in PRESETS:
            span = ((today - timedelta(days=days - 1)).isoformat(), today.isoformat())
            url = changelist.get_query_string({self.since_param: span[0], self.until_param: span[1]})
            presets.append({"label": label, "url": url, "selected": chosen == span})
        return presets

    def _day(self, name):
        raw = self._value(name)
        if not raw:
            return None
        day = parse_date(raw) if len(raw) == 10 else None
        if day is None:
            raise IncorrectLookupParameters(f"{name}: expected a date as YYYY-MM-DD")
        return day

    def queryset(self, request, queryset):
        since, until = self._day(self.since_param), self._day(self.until_param)
        if isinstance(self.field, models.DateTimeField):
            tz = timezone.get_current_timezone()
            if since:
                queryset = queryset.filter(**{f"{self.field_path}__gte": datetime.combine(since, time.min, tz)})
            if until:
                end = datetime.combine(until + timedelta(days=1), time.min, tz)
                queryset = queryset.filter(**{f"{self.field_path}__lt": end})
            return queryset
        if since:
            queryset = queryset.filter(**{f"{self.field_path}__gte": since})
        if until:
            queryset = queryset.filter(**{f"{self.field_path}__lte": until})
        return queryset


class ExactTextFilter(_InputFilter):
    """An exact match typed into a box: ids are too many to list as links."""

    def __init__(self, field, request, params, model, model_admin, field_path):
        self.param = field_path
        super().__init__(field, request, params, model, model_admin, field_path)

    def expected_parameters(self):
        return [self.param]

    def inputs(self):
        return [{"name": self.param, "label": "Equals", "type": "text", "value": self._value(self.param)}]

    def queryset(self, request, queryset):
        value = self._value(self.param)
        return queryset.filter(**{self.param: value}) if value else queryset


class PluginSlugFilter(admin.AllValuesFieldListFilter):
    """The plugin slugs present in the (scoped) changelist."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.title = "plugin"


@admin.display(description="plugin", ordering="plugin_slug")
def plugin_column(obj):
    """The plugin a log row names, labelled as a person would say it (not "plugin slug")."""
    return obj.plugin_slug
