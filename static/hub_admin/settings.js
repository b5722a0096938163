// Settings forms: a field per setting, or the same settings as JSON for power users (one at a time).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const json = document.querySelector('textarea[name="settings_json"]');
  const mode = document.querySelector('input[name="settings_mode"]');
  if (!json || !mode) return;
  const schema = JSON.parse(json.dataset.schema || "{}");
  const keys = Object.keys(schema);
  if (!keys.length) return;
  const jsonRow = json.closest(".form-row");
  const settingRows = keys.map((key) => document.querySelector(".field-setting_" + CSS.escape(key))).filter(Boolean);
  const inputs = (key) => Array.from(document.querySelectorAll('[name="setting_' + CSS.escape(key) + '"]'));
  const freeList = (spec) => spec.type === "string[]" && !spec.choices;

  const problem = document.createElement("p");
  problem.className = "errornote hub-json-problem";
  problem.setAttribute("role", "alert");
  problem.hidden = true;
  jsonRow.prepend(problem);

  const toggle = document.createElement("button");
  toggle.type = "button";
  toggle.className = "button hub-json-toggle";
  jsonRow.parentNode.insertBefore(toggle, jsonRow);

  function read() {
    const values = {};
    for (const key of keys) {
      const spec = schema[key], fields = inputs(key);
      if (!fields.length) continue;
      if (spec.type === "boolean") values[key] = fields[0].checked;
      else if (spec.type === "string[]" && spec.choices) values[key] = fields.filter((f) => f.checked).map((f) => f.value);
      else if (freeList(spec)) values[key] = fields[0].value.split("\n").map((l) => l.trim()).filter(Boolean);
      else if (fields[0].value === "") continue;
      else if (spec.type === "integer" || spec.type === "number") values[key] = Number(fields[0].value);
      else values[key] = fields[0].value;
    }
    return values;
  }

  function write(values) {
    for (const key of keys) {
      const spec = schema[key], fields = inputs(key);
      const value = key in values ? values[key] : spec.default;
      if (!fields.length) continue;
      if (spec.type === "boolean") fields[0].checked = Boolean(value);
      else if (spec.type === "string[]" && spec.choices) fields.forEach((f) => { f.checked = (value || []).includes(f.value); });
      else if (freeList(spec)) fields[0].value = (value || []).join("\n");
      else fields[0].value = value === undefined || value === null ? "" : value;
    }
  }

  function show(asJson) {
    mode.value = asJson ? "json" : "form";
    jsonRow.hidden = !asJson;
    settingRows.forEach((row) => { row.hidden = asJson; });
    toggle.textContent = asJson ? "Edit as a form" : "Edit as JSON";
  }

  toggle.addEventListener("click", () => {
    if (mode.value !== "json") {
      json.value = JSON.stringify(read(), null, 2);
      problem.hidden = true;
      show(true);
      return;
    }
    let values;
    try {
      values = JSON.parse(json.value || "{}");
      if (values === null || typeof values !== "object" || Array.isArray(values)) throw new Error("expected a JSON object");
    } catch (error) {
      problem.textContent = "This is not a JSON object of settings (" + error.message + "): fix it to go back to the form.";
      problem.hidden = false;
      return;
    }
    problem.hidden = true;
    write(values);
    show(false);
  });
  show(mode.value === "json");
});
