// Draws the latency page's charts (Chart.js, vendored in static/vendor) from the series the page embeds.
(function () {
  "use strict";
  const source = document.getElementById("latency-series");
  if (!source || typeof Chart === "undefined") {
    return;
  }
  const series = JSON.parse(source.textContent);
  const COLORS = { calls: "#417690", p50: "#5b9a68", p95: "#e0a526", p99: "#c0504d", failures: "#8064a2" };
  const common = {
    animation: false,
    responsive: true,
    maintainAspectRatio: false,
    scales: { y: { beginAtZero: true } },
    plugins: { legend: { position: "bottom" } },
  };
  function line(label, data, color) {
    return { label: label, data: data, borderColor: color, backgroundColor: color, spanGaps: true,
             borderWidth: 3, pointRadius: 2 };
  }
  new Chart(document.getElementById("chart-calls"), {
    type: "bar",
    data: { labels: series.labels, datasets: [{ label: "runs", data: series.calls, backgroundColor: COLORS.calls }] },
    options: common,
  });
  new Chart(document.getElementById("chart-latency"), {
    type: "line",
    data: { labels: series.labels, datasets: [line("p50", series.p50, COLORS.p50), line("p95", series.p95, COLORS.p95),
                                              line("p99", series.p99, COLORS.p99)] },
    options: common,
  });
  new Chart(document.getElementById("chart-failures"), {
    type: "line",
    data: { labels: series.labels, datasets: [line("failed %", series.failureRate, COLORS.failures)] },
    options: common,
  });
  document.getElementById("latency-report").dataset.rendered = "true";
})();
