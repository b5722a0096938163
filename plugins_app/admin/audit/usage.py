"""The usage page's chart: runs and time per day for the last 30 days, stacked by plugin, as SVG."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta

from django.db.models import Sum

DAYS = 30
PALETTE = ["#417690", "#e0a526", "#5b9a68", "#c0504d", "#8064a2", "#4bacc6", "#f79646", "#7f7f7f"]
LEFT, TOP, BAR_STEP, BAR_WIDTH, PANEL_HEIGHT, PANEL_GAP, AXIS = 56, 18, 22, 16, 110, 46, 22


def _format(value: float, unit: str) -> str:
    if unit == "ms" and value >= 1000:
        return f"{value / 1000:,.1f} s"
    return f"{value:,.0f}{' ' + unit if unit else ''}"


def usage_chart(queryset, today: date) -> dict:
    """Geometry for the template; `queryset` is the (scoped, filtered) UsageDaily changelist."""
    start = today - timedelta(days=DAYS - 1)
    rows = (queryset.filter(day__gte=start, day__lte=today).order_by()
            .values("day", "plugin_slug").annotate(runs=Sum("runs"), ms=Sum("total_ms")))
    days = [start + timedelta(days=i) for i in range(DAYS)]
    data: dict[str, defaultdict[date, dict[str, float]]] = {"runs": defaultdict(dict), "ms": defaultdict(dict)}
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        data["runs"][row["day"]][row["plugin_slug"]] = row["runs"]
        data["ms"][row["day"]][row["plugin_slug"]] = row["ms"]
        totals[row["plugin_slug"]] += row["runs"]
    plugins = sorted(totals, key=lambda slug: (-totals[slug], slug))
    colors = {slug: PALETTE[i % len(PALETTE)] for i, slug in enumerate(plugins)}

    panels = []
    for index, (metric, title, unit) in enumerate((("runs", "Handler runs per day", ""),
                                                   ("ms", "Handler time per day", "ms"))):
        top = TOP + index * (PANEL_HEIGHT + PANEL_GAP)
        peak = max((sum(data[metric][d].values()) for d in days), default=0) or 1
        rects = []
        for i, day in enumerate(days):
            bottom: float = top + PANEL_HEIGHT
            for slug in plugins:
                value = data[metric][day].get(slug, 0)
                if not value:
                    continue
                height = max(value / peak * PANEL_HEIGHT, 1.0)
                bottom -= height
                rects.append({"x": LEFT + i * BAR_STEP, "y": round(bottom, 2), "w": BAR_WIDTH,
                              "h": round(height, 2), "color": colors[slug],
                              "title": f"{day.isoformat()} {slug}: {_format(value, unit)}"})
        panels.append({"title": title, "top": top, "bottom": top + PANEL_HEIGHT, "mid": top + PANEL_HEIGHT / 2,
                       "peak": _format(peak if rects else 0, unit), "rects": rects})
    width = LEFT + DAYS * BAR_STEP + 10
    height = TOP + 2 * PANEL_HEIGHT + PANEL_GAP + AXIS
    labels = [{"x": LEFT + i * BAR_STEP + BAR_WIDTH / 2, "text": day.strftime("%b %d")}
              for i, day in enumerate(days) if i % 5 == 0 or i == DAYS - 1]
    return {"width": width, "height": height, "right": width - 10, "axis_y": height - 6,
            "panels": panels, "labels": labels, "legend": [(slug, colors[slug]) for slug in plugins],
            "start": start, "end": today, "empty": not plugins}
