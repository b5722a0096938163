// The admin's Live page: one EventSource on the account's tail stream, newest rows first (at most 500).
(function () {
  "use strict";
  const MAX_ROWS = 500;
  let source = null;

  function detail(event) {
    if (event.type === "run") return `${event.durationMs.toFixed(1)} ms${event.changed ? ", changed" : ""}`;
    if (event.type === "log") return `[${event.level}] ${event.message}`;
    if (event.type === "warning") return event.message;
    if (event.type === "cancel") return event.reason;
    if (event.type === "dropped") return `${event.count} event(s) dropped: over 200 a second`;
    return "";
  }

  function addRow(body, event) {
    const row = document.createElement("tr");
    row.className = `hub-live-${event.type}`;
    const cells = [new Date(event.at * 1000).toLocaleTimeString(), event.type, event.hook || "",
                   event.plugin || "", event.status || "", detail(event)];
    for (const text of cells) {
      const cell = document.createElement("td");
      cell.textContent = text;   // plugin text is never HTML
      row.appendChild(cell);
    }
    body.insertBefore(row, body.firstChild);
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("hub-live-form");
    const state = document.getElementById("hub-live-state");
    const body = document.querySelector("#hub-live tbody");
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (source) source.close();
      const params = new URLSearchParams(new FormData(form));
      for (const [key, value] of [...params]) if (!value) params.delete(key);
      source = new EventSource(`${form.dataset.stream}?${params}`);
      state.textContent = "connecting";
      source.onmessage = (message) => {
        const event = JSON.parse(message.data);
        if (event.type === "ready") { state.textContent = "live"; return; }
        addRow(body, event);
      };
      source.onerror = () => { state.textContent = "reconnecting"; };
    });
  });
})();
