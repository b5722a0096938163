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
    const empty = body.querySelector("tr.hub-live-empty");
    if (empty) empty.remove();
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

  function setEmpty(body, text) {
    const cell = body.querySelector("tr.hub-live-empty td");
    if (cell) cell.textContent = text;
  }

  // The stream filters by slug; people type what the admin shows them, the plugin's name. Either is taken
  // (case aside), and a filter no installed plugin answers to is said rather than watched in silence.
  function pluginSlug(plugins, wanted) {
    const text = wanted.trim().toLowerCase();
    if (!text) return "";
    const found = plugins.find(([slug, name]) => slug.toLowerCase() === text || name.toLowerCase() === text);
    return found ? found[0] : null;
  }

  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("hub-live-form");
    const state = document.getElementById("hub-live-state");
    const problem = document.getElementById("hub-live-problem");
    const body = document.querySelector("#hub-live tbody");
    const byAccount = JSON.parse(document.getElementById("hub-live-plugin-names").textContent);
    const names = document.getElementById("hub-live-plugins");
    const plugins = () => byAccount[form.elements.account.value] || [];
    const offer = () => {
      names.replaceChildren(...plugins().map(([slug, name]) => Object.assign(document.createElement("option"),
        { value: name, label: slug })));
    };
    form.elements.account.addEventListener("change", offer);
    offer();
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const params = new URLSearchParams(new FormData(form));
      const typed = params.get("plugin") || "";
      const slug = pluginSlug(plugins(), typed);
      if (slug === null) {
        const account = form.elements.account.selectedOptions[0].textContent;
        problem.textContent = `No plugin installed in ${account} is called “${typed.trim()}” (by name or slug), ` +
          "so nothing would match: pick one from the list or clear the filter.";
        problem.hidden = false;
        return;
      }
      problem.hidden = true;
      params.set("plugin", slug);
      for (const [key, value] of [...params]) if (!value) params.delete(key);
      if (source) source.close();
      source = new EventSource(`${form.dataset.stream}?${params}`);
      state.textContent = "connecting";
      source.onmessage = (message) => {
        const event = JSON.parse(message.data);
        if (event.type === "ready") {
          state.textContent = "live";
          setEmpty(body, "Watching: nothing has happened yet. Runs, logs, warnings and cancels appear here as they happen.");
          return;
        }
        addRow(body, event);
      };
      source.onerror = () => { state.textContent = "reconnecting"; };
    });
  });
})();
