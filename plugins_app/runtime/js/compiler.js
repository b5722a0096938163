// Install-time compiler: TypeScript's transpileModule strips types; the AST says which host
// members the plugin reaches for and whether it tried to use modules. Runs in its own isolate.
(() => {
  "use strict";
  const position = (file, start) => {
    const lc = file.getLineAndCharacterOfPosition(start);
    return { line: lc.line + 1, column: lc.character + 1 };
  };

  function hostMembers(file) {
    const found = new Set();
    const visit = (node) => {
      if (ts.isPropertyAccessExpression(node)) {
        const path = [];
        let cur = node;
        while (true) {
          if (ts.isPropertyAccessExpression(cur)) { path.unshift(cur.name.text); cur = cur.expression; }
          else if (ts.isNonNullExpression(cur) || ts.isParenthesizedExpression(cur)) { cur = cur.expression; }
          else break;
        }
        const root = ts.isIdentifier(cur) ? cur.text : null;
        let isHost = root === "host";
        if (root === "globalThis" && path[0] === "host") { path.shift(); isHost = true; }
        if (isHost && path.length) {
          found.add(path.slice(0, 3).join("."));
          return;   // the longest chain wins; don't re-add its prefixes
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
    return [...found].sort();
  }

  globalThis.__compile = (source, fileName) => {
    const out = ts.transpileModule(source, {
      fileName,
      reportDiagnostics: true,
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, allowJs: true },
    });
    const errors = (out.diagnostics || []).map((d) => ({
      message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
      ...(d.file && d.start !== undefined ? position(d.file, d.start) : { line: 1, column: 1 }),
    }));
    const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, true);
    for (const st of file.statements) {
      const isModule = ts.isImportDeclaration(st) || ts.isExportDeclaration(st) || ts.isExportAssignment(st)
        || (ts.canHaveModifiers(st) && (ts.getModifiers(st) || []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword));
      if (isModule) {
        errors.push({ message: "plugins are scripts: import and export are not available; assign handlers to globalThis.middleware", ...position(file, st.getStart()) });
      }
    }
    const code = out.outputText.replace(/\nexport \{\};\s*$/, "\n");
    return JSON.stringify({ errors, code, hostMembers: hostMembers(file) });
  };
})();
