// Try-it page: each hook has its own context fields, so choosing another hook reloads the page for it
// (after asking, when fields were edited).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("tryit_form");
  const hook = document.getElementById("id_hook");
  const account = document.getElementById("id_account");
  if (!form || !hook) return;
  let edited = false;
  form.addEventListener("input", (event) => { if (event.target !== hook) edited = true; });
  hook.addEventListener("change", () => {
    if (edited && !window.confirm("Switch to " + hook.value + "? The context you edited will be replaced by its example.")) {
      hook.value = hook.dataset.shown;
      return;
    }
    const params = new URLSearchParams({ hook: hook.value });
    if (account && account.value) params.set("account", account.value);
    window.location.search = params.toString();
  });
  hook.dataset.shown = hook.value;
});
