// The plugin source editor: CodeMirror 6 with JavaScript/TypeScript highlighting, line numbers, the
// compile errors marked at their line and column, and a starter template per hook. The textarea it
// replaces stays in the form and is kept in sync, so the page works the same without JavaScript.
import { basicSetup, EditorView } from "codemirror";
import { javascript, javascriptLanguage } from "@codemirror/lang-javascript";
import { Compartment, EditorState } from "@codemirror/state";
import { lintGutter, setDiagnostics } from "@codemirror/lint";

function completionTable() {
  const element = document.getElementById("hub-completions");
  return element ? JSON.parse(element.textContent) : null;
}

function position(doc, line, column) {
  const at = doc.line(Math.min(Math.max(line, 1), doc.lines));
  return Math.min(at.from + Math.max(column - 1, 0), at.to);
}

function diagnostics(doc, errors) {
  return errors.map((error) => {
    const from = position(doc, error.line, error.column);
    // One character wide where there is one, a point at the end of a line.
    const to = from < doc.lineAt(from).to ? from + 1 : from;
    return { from, to, severity: "error", message: `Line ${error.line}, column ${error.column}: ${error.message}` };
  });
}

// Completes hook names after `middleware.`, the hook's context fields after `c.` (or `context.`, `ctx.`)
// and host members after `host.`, from the table the page embeds (the d.ts's own sources).
function hubCompletions(table) {
  return (context) => {
    const hook = context.matchBefore(/middleware\.\w*/);
    if (hook) {
      return { from: hook.from + "middleware.".length, validFor: /^\w*$/,
               options: table.hooks.map((h) => ({ label: h.label, type: "function", detail: h.detail, info: h.info })) };
    }
    const host = context.matchBefore(/\bhost\.[\w.]*/);
    if (host) {
      const typed = host.text.slice("host.".length);
      const parent = typed.includes(".") ? typed.slice(0, typed.lastIndexOf(".") + 1) : "";
      const seen = new Map();
      for (const member of table.host) {
        if (!member.path.startsWith(parent)) continue;
        const rest = member.path.slice(parent.length);
        const label = rest.split(".")[0];
        if (!seen.has(label)) {
          seen.set(label, rest.includes(".") ? { label, type: "namespace" }
            : { label, type: member.detail.includes("(") ? "method" : "property", detail: member.detail, info: member.info });
        }
      }
      return { from: host.from + "host.".length + parent.length, validFor: /^\w*$/, options: [...seen.values()] };
    }
    const field = context.matchBefore(/\b(?:c|ctx|context)\.\w*/);
    if (field) {
      const before = context.state.sliceDoc(0, context.pos);
      const hooks = [...before.matchAll(/middleware\.(\w+)\s*=/g)];
      const fields = hooks.length ? table.fields[hooks[hooks.length - 1][1]] : null;
      if (!fields) return null;
      return { from: field.from + field.text.indexOf(".") + 1, validFor: /^\w*$/,
               options: fields.map((f) => ({ label: f.label, type: "property", detail: f.detail })) };
    }
    return null;
  };
}

function mount(textarea) {
  const languageSelect = document.getElementById("id_language");
  const language = new Compartment();
  const modeFor = () => javascript({ typescript: !languageSelect || languageSelect.value === "typescript" });
  const view = new EditorView({
    parent: textarea.parentNode,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        basicSetup,
        language.of(modeFor()),
        lintGutter(),
        ...(completionTable() ? [javascriptLanguage.data.of({ autocomplete: hubCompletions(completionTable()) })] : []),
        EditorView.lineWrapping,
        EditorView.contentAttributes.of({ "aria-label": "Plugin source" }),
        EditorView.editorAttributes.of({ class: "hub-editor" }),   // CodeMirror owns the class attribute
        EditorView.updateListener.of((update) => {
          if (update.docChanged) textarea.value = update.state.doc.toString();
        }),
      ],
    }),
  });
  textarea.parentNode.insertBefore(view.dom, textarea);
  textarea.hidden = true;
  textarea.dataset.hubEditorMounted = "true";

  if (languageSelect) {
    languageSelect.addEventListener("change", () => view.dispatch({ effects: language.reconfigure(modeFor()) }));
  }

  const errors = JSON.parse(textarea.dataset.errors || "[]");
  if (errors.length) {
    view.dispatch(setDiagnostics(view.state, diagnostics(view.state.doc, errors)));
    const first = position(view.state.doc, errors[0].line, errors[0].column);
    view.dispatch({ selection: { anchor: first }, scrollIntoView: true });
  }

  const templates = document.getElementById("hub-starters");
  const picker = document.getElementById("hub-starter");
  if (templates && picker) {
    const starters = JSON.parse(templates.textContent);
    picker.addEventListener("change", () => {
      const hook = picker.value;
      if (!hook) return;
      const typescript = !languageSelect || languageSelect.value === "typescript";
      const text = starters[hook][typescript ? "typescript" : "javascript"];
      const current = view.state.doc.toString().trim();
      if (current && !window.confirm(`Replace the source with the ${hook} starter?`)) {
        picker.value = "";
        return;
      }
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
      picker.value = "";
      view.focus();
    });
  }
  window.hubEditor = view;   // for tests and the browser console
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("textarea[data-hub-editor]").forEach(mount);
});
