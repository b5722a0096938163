"""The latency page in headless Chromium: an auditor's charts draw the recorded data (checked on a screenshot)."""

import struct
import time
import zlib

import pytest

from accounts import services
from accounts.models import Account
from plugins_app.services.observability.latency import LatencyRecorder, Window

from .conftest import PASSWORD, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

P99_RED = (192, 80, 77)       # the p99 line (#c0504d)
CALLS_BLUE = (65, 118, 144)   # the runs bars (#417690)


def record(account, plugin, durations, minute, status="ran"):
    recorder = LatencyRecorder()
    window = recorder._pending.setdefault((account.pk, plugin, "systemPrompt", minute), Window())
    for ms in durations:
        window.add(status, ms)
    recorder.flush()


def png_pixels(data: bytes, top_share: float = 1.0) -> list[tuple[int, int, int]]:
    """RGB(A) 8-bit non-interlaced PNG (what Chromium writes) -> the RGB of its pixels in the top
    `top_share` of its height (the plot area, above the legend)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0
    channels = 4 if color == 6 else 3
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(line)
        previous = line
    return [tuple(row[x * channels:x * channels + 3]) for row in rows[:int(height * top_share)] for x in range(width)]


def count_near(pixels, rgb, tolerance=24) -> int:
    return sum(1 for p in pixels if all(abs(a - b) <= tolerance for a, b in zip(p, rgb, strict=False)))


def test_an_auditor_sees_the_latency_charts_drawn(page, live_server, tmp_path):
    account = Account.objects.create(name="acme")
    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    # One clock reading for all three minutes: the page may be drawn after a minute turns.
    now = int(time.time() // 60)
    record(account, "slowpoke", [10.0] * 95 + [400.0] * 5, now - 2)
    record(account, "slowpoke", [300.0] * 10, now - 1)
    record(account, "flaky", [5.0] * 10, now, status="error")
    log_in(page, live_server, "audrey")

    page.goto(f"{live_server.url}/admin/plugins_app/latencyhistogram/?range=hour")
    page.wait_for_selector("#latency-report[data-rendered=true]")
    assert page.locator("#slowest-plugins tbody tr").first.inner_text().startswith("slowpoke")
    assert page.locator("#failing-plugins tbody tr").first.inner_text().startswith("flaky")
    # The three minutes that ran, wherever the hour's axis put them (it ends at the minute the page was drawn).
    drawn = page.evaluate("""() => {
        const runs = Chart.getChart('chart-calls').data.datasets[0].data;
        const ran = runs.flatMap((n, i) => n ? [i] : []);
        return Chart.getChart('chart-latency').data.datasets.map(d => ran.map(i => d.data[i]));
    }""")
    p50, _, p99 = drawn
    assert len(p50) == 3
    assert 9 <= p50[0] <= 11 and 360 <= p99[0] <= 400  # 95 quick runs and 5 slow ones, two minutes ago
    assert p99[1:] == [300.0, 5.0]

    page.screenshot(path=str(tmp_path / "latency-page.png"), full_page=True)
    latency_png = page.locator("#chart-latency").screenshot(path=str(tmp_path / "latency-chart.png"))
    calls_png = page.locator("#chart-calls").screenshot(path=str(tmp_path / "calls-chart.png"))
    # Above the legends: the p99 line, apart from the others, and the runs bars are drawn.
    assert count_near(png_pixels(latency_png, top_share=0.7), P99_RED) > 30
    assert count_near(png_pixels(calls_png, top_share=0.7), CALLS_BLUE) > 200


def test_an_empty_range_draws_no_chart(page, live_server):
    Account.objects.create(name="acme")
    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    log_in(page, live_server, "audrey")
    page.goto(f"{live_server.url}/admin/plugins_app/latencyhistogram/?range=30d")
    assert "No handler ran in this range." in page.locator("#latency-report").inner_text()
    assert page.locator("canvas").count() == 0
