// The plugin source editor: CodeMirror 6 with JavaScript/TypeScript highlighting, line numbers, the
// compile errors marked at their line and column, and a starter template per hook. The textarea it
// replaces stays in the form and is kept in sync, so the page works the same without JavaScript.
import { basicSetup, EditorView } from "codemirror";
import { javascript } from "@codemirror/lang-javascript";
import { Compartment, EditorState } from "@codemirror/state";
import { lintGutter, setDiagnostics } from "@codemirror/lint";

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
