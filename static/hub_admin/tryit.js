// Try-it page: choosing another hook loads that hook's sample context, unless the context was edited.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const samples = JSON.parse(document.getElementById("hub-samples").textContent);
  const hook = document.getElementById("id_hook");
  const context = document.getElementById("id_context");
  if (!hook || !context) return;
  let shown = hook.value;
  hook.addEventListener("change", () => {
    const untouched = context.value.trim() === (samples[shown] || "").trim();
    if (untouched || window.confirm("Replace the edited context with the sample for " + hook.value + "?")) {
      context.value = samples[hook.value] || "{}";
    }
    shown = hook.value;
  });
});
