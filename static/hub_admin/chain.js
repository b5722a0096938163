// Chain page: after each drag, renumber the rows and say whether the new order was saved.
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
      say("success", "Saved. The chain now runs " + names.map((name, i) => (i + 1) + ". " + name).join(", ") +
        "; the very next execute call uses this order.");
    } else {
      const reason = (await response.clone().text()).slice(0, 300);
      say("error", "Not saved (" + response.status + "): " + reason + " Reload the page to see the order in force.");
    }
    return response;
  };
})();
