// The plugin source editor (install and draft pages): CodeMirror 6 with JavaScript/TypeScript
// highlighting, line numbers, the compile and type errors marked at their line and column, completion
// from the SDK's tables, a starter template per hook and, on the draft page, a line diff against the
// live source. The textarea it replaces stays in the form and is kept in sync, so the page works the
// same without JavaScript.
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

// The handler the cursor is in: the last `middleware.<hook> = (<context>, <tools>) =>` before it.
function enclosingHandler(before) {
  const found = [...before.matchAll(/middleware(?:\.(\w+)|\[["'](\w+)["']\])\s*=\s*(?:async\s*)?(?:function\s*\w*\s*)?\(?\s*(\w+)?(?:\s*:[^,)]*)?(?:\s*,\s*(\w+))?/g)];
  if (!found.length) return null;
  const last = found[found.length - 1];
  return { hook: last[1] || last[2], context: last[3] || "c", tools: last[4] || "tools" };
}

const option = (item, type) => ({ label: item.label, type: item.type || type, detail: item.detail, info: item.info });

// Completes hook names after `middleware.`; the hook's context fields after its context parameter (or
// `c.`, `ctx.`, `context.`); `tools.cancel` in cancellable hooks; host members after `host.` with their
// signatures; the members of `console.` and `crypto.`; and the web globals at the start of a word. All
// from the table the page embeds (the same sources as middleware.d.ts).
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
    const dotted = context.matchBefore(/\b[A-Za-z_$][\w$]*\.\w*/);
    if (dotted) {
      const owner = dotted.text.slice(0, dotted.text.indexOf("."));
      const from = dotted.from + owner.length + 1;
      const handler = enclosingHandler(context.state.sliceDoc(0, context.pos));
      if (handler && owner === handler.tools) {
        return (table.cancellable || []).includes(handler.hook)
          ? { from, validFor: /^\w*$/, options: (table.tools || []).map((t) => option(t, "method")) }
          : null;   // a hook that can't be cancelled gets no tools
      }
      const fields = handler && table.fields[handler.hook];
      if (fields && (owner === handler.context || ["c", "ctx", "context"].includes(owner))) {
        return { from, validFor: /^\w*$/, options: fields.map((f) => option(f, "property")) };
      }
      const members = (table.members || {})[owner];
      if (members) return { from, validFor: /^\w*$/, options: members.map((m) => option(m, "method")) };
      return null;
    }
    const word = context.matchBefore(/(?:^|[^\w$.])[A-Za-z_$][\w$]*$/);
    if (word && table.globals && (context.explicit || word.text.trim().length >= 2)) {
      const start = word.from + word.text.search(/[A-Za-z_$]/);
      return { from: start, validFor: /^[\w$]*$/, options: table.globals.map((g) => option(g, "variable")) };
    }
    return null;
  };
}

// A line diff (longest common subsequence) of the live source and the editor's: "-" lines only in
// live, "+" lines only in the draft. Large sources are compared by their changed middle only.
function lineDiff(before, after) {
  const a = before.split("\n"), b = after.split("\n");
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const x = a.slice(head, a.length - tail), y = b.slice(head, b.length - tail);
  if (x.length * y.length > 4_000_000) {
    return [...x.map((t) => ["-", t]), ...y.map((t) => ["+", t])];
  }
  const n = x.length, m = y.length, lcs = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * (m + 1) + j] = x[i] === y[j] ? lcs[(i + 1) * (m + 1) + j + 1] + 1
        : Math.max(lcs[(i + 1) * (m + 1) + j], lcs[i * (m + 1) + j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) { i++; j++; }
    else if (j < m && (i === n || lcs[i * (m + 1) + j + 1] >= lcs[(i + 1) * (m + 1) + j])) out.push(["+", y[j++], head + j]);
    else out.push(["-", x[i++], head + i]);
  }
  return out;
}

function showDiff(view, live, target) {
  const changes = lineDiff(live, view.state.doc.toString());
  target.replaceChildren();
  if (!changes.length) {
    target.textContent = "The draft is the same as the live source.";
  }
  for (const [sign, text, line] of changes) {
    const row = document.createElement("div");
    row.className = sign === "+" ? "hub-add" : "hub-del";
    row.textContent = `${sign} ${String(line).padStart(4)} | ${text}`;
    target.appendChild(row);
  }
  target.hidden = false;
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

  if (textarea.dataset.goto) {   // opened from a failed handler's position: the cursor waits there
    const at = JSON.parse(textarea.dataset.goto);
    view.dispatch({ selection: { anchor: position(view.state.doc, at.line, at.column) }, scrollIntoView: true });
    view.focus();
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
  const liveSource = document.getElementById("hub-live-source");
  const diffButton = document.getElementById("hub-diff-live");
  const diffTarget = document.getElementById("hub-live-diff");
  if (liveSource && diffButton && diffTarget) {
    const live = JSON.parse(liveSource.textContent);
    diffButton.addEventListener("click", () => showDiff(view, live, diffTarget));
  }
  window.hubEditor = view;   // for tests and the browser console
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("textarea[data-hub-editor]").forEach(mount);
});
