// Chain page: reorder by drag, Up/Down buttons or arrow keys on a handle; after each move, renumber the rows
// and say whether the new order was saved.
"use strict";
(() => {
  // This script loads in <head>, before sortable2's configuration: read it when it is needed.
  function updateUrl() {
    const config = document.getElementById("admin_sortable2_config");
    return config ? JSON.parse(config.textContent).update_url : null;
  }

  function status() {
    let box = document.getElementById("hub-chain-status");
    if (!box) {
      box = document.createElement("div");
      box.id = "hub-chain-status";
      box.setAttribute("role", "status");
      box.setAttribute("aria-live", "polite");
      const table = document.getElementById("changelist-form") || document.getElementById("result_list");
      table.parentNode.insertBefore(box, table);
    }
    return box;
  }

  function rows() {
    return Array.from(document.querySelectorAll("#result_list tbody tr"));
  }

  function say(kind, text) {
    const box = status();
    box.className = "hub-chain-status messagelist";
    box.innerHTML = "";
    const item = document.createElement("p");
    item.className = kind;
    item.textContent = text;
    box.appendChild(item);
  }

  // --- the keyboard's way: Up/Down buttons on each row, and arrow keys on the focusable handle -------------
  // A move swaps two rows and posts the whole order, as sortable2 posts a drop, to the same update view
  // (the service applies it under the account's lock); the fetch wrapper below confirms it.
  let saving = false;

  function csrfToken() {
    const input = document.querySelector('#changelist-form input[name="csrfmiddlewaretoken"]') ||
      document.querySelector('input[name="csrfmiddlewaretoken"]');
    return input ? input.value : "";
  }

  function nameOf(row) {
    return (row.querySelector(".hub-plugin-name") || row).textContent.trim();
  }

  function refreshControls() {
    const all = rows();
    all.forEach((row, index) => {
      const [up, down] = row.querySelectorAll("button.hub-move");
      if (up) up.disabled = index === 0;
      if (down) down.disabled = index === all.length - 1;
      const handle = row.querySelector(".handle");
      if (handle) {
        handle.tabIndex = 0;
        handle.setAttribute("role", "button");
        handle.setAttribute("aria-label", `Reorder ${nameOf(row)}, place ${index + 1} of ${all.length}: ` +
          "drag, or press the up and down arrow keys");
      }
    });
  }

  async function move(row, step, focusAfter) {
    const all = rows();
    const from = all.indexOf(row);
    const to = from + step;
    if (saving || from < 0 || to < 0 || to >= all.length) return;
    saving = true;
    const body = row.parentNode;
    if (step < 0) body.insertBefore(row, all[to]); else body.insertBefore(row, all[to].nextSibling);
    refreshControls();
    focusAfter();
    const updatedItems = rows().map((r, index) => [r.querySelector(".handle").getAttribute("pk"), index]);
    try {
      await window.fetch(updateUrl(), {
        method: "POST",
        headers: { "Accept": "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: JSON.stringify({ updatedItems }),
      });
    } finally {
      saving = false;
    }
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button.hub-move");
    if (!button) return;
    event.preventDefault();
    const row = button.closest("tr");
    const step = Number(button.dataset.move);
    move(row, step, () => {
      const [up, down] = row.querySelectorAll("button.hub-move");
      const same = step < 0 ? up : down;
      (same.disabled ? (step < 0 ? down : up) : same).focus();
    });
  });

  document.addEventListener("keydown", (event) => {
    const handle = event.target.closest && event.target.closest("#result_list .handle");
    if (!handle || (event.key !== "ArrowUp" && event.key !== "ArrowDown")) return;
    event.preventDefault();
    move(handle.closest("tr"), event.key === "ArrowUp" ? -1 : 1, () => handle.focus());
  });

  document.addEventListener("DOMContentLoaded", refreshControls);

  const originalFetch = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const response = await originalFetch(input, init);
    if (String(input) !== updateUrl()) return response;
    const names = rows().map((row) => (row.querySelector(".hub-plugin-name") || row).textContent.trim());
    if (response.ok) {
      rows().forEach((row, index) => {
        const place = row.querySelector(".hub-place");
        if (place) place.textContent = String(index + 1);
      });
      refreshControls();
      say("success", "Saved. The chain now runs " + names.map((name, i) => (i + 1) + ". " + name).join(", ") +
        "; the very next execute call uses this order.");
    } else {
      const reason = (await response.clone().text()).slice(0, 300);
      say("error", "Not saved (" + response.status + "): " + reason + " Reload the page to see the order in force.");
    }
    return response;
  };
})();
