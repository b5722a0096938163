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

  // Dynamic import() is refused where it stands; SES would refuse it at load, without a column.
  function dynamicImports(file) {
    const errors = [];
    const visit = (node) => {
      if (node.kind === ts.SyntaxKind.CallExpression && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        errors.push({ message: "plugins are scripts: dynamic import() is not available; bundle the module instead",
          ...position(file, node.getStart(file)) });
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
    return errors;
  }

  // A `with` statement makes SES refuse the whole source at line 1, column 1: name it where it stands
  // (the Python side adds the way round it, runtime/tables/error_hints.py).
  function withStatements(file) {
    const errors = [];
    const visit = (node) => {
      if (node.kind === ts.SyntaxKind.WithStatement) {
        errors.push({ message: "SyntaxError: Strict mode code may not include a with statement",
          ...position(file, node.getStart(file)) });
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
    return errors;
  }

  // ---- Literal escaping (issue 13): SES refuses any source text holding "<!--", "-->" or "import("
  // (and "import" before a comment), even inside a string, a regular expression, a template or a
  // comment, where bundled libraries often have them (marked's HTML-comment rule). Its evade options
  // would change what those literals mean, so instead each such character inside a literal is
  // written as an equivalent escape (\x3C, \x3E, \x69), and inside a comment blanked. SES's checks
  // still run on the result: text like this left in code is refused with its line and column.
  const SES_SUSPECT = /<!--|-->|(^|[^.]|\.\.\.)\bimport(\s*(?:\(|\/[/*]))/g;
  const LITERAL_KINDS = new Set([ts.SyntaxKind.StringLiteral, ts.SyntaxKind.RegularExpressionLiteral,
    ts.SyntaxKind.NoSubstitutionTemplateLiteral, ts.SyntaxKind.TemplateHead, ts.SyntaxKind.TemplateMiddle,
    ts.SyntaxKind.TemplateTail]);
  const ESCAPES = { "<": "\\x3C", ">": "\\x3E", i: "\\x69" };
  const COMMENT_KINDS = new Set([ts.SyntaxKind.SingleLineCommentTrivia, ts.SyntaxKind.MultiLineCommentTrivia]);

  // Where the character at `at` stands: "literal", "comment" or "code".
  function placeOf(file, text, at) {
    let node = file;
    for (;;) {
      let inner = null;
      ts.forEachChild(node, (child) => {
        if (child.pos <= at && at < child.end) { inner = child; return true; }
        return undefined;
      });
      if (inner === null) break;
      node = inner;
    }
    if (LITERAL_KINDS.has(node.kind) && at >= node.getStart(file)) return "literal";
    // Between `node`'s children there are only punctuation, keywords and trivia: scan from the end
    // of the last child before `at` to find the token holding it.
    let from = node.pos;
    ts.forEachChild(node, (child) => { if (child.end <= at) from = child.end; });
    const scanner = ts.createScanner(ts.ScriptTarget.ES2022, false, ts.LanguageVariant.Standard, text, undefined, from);
    for (;;) {
      const kind = scanner.scan();
      if (kind === ts.SyntaxKind.EndOfFileToken || scanner.getTokenStart() > at) return "code";
      if (at < scanner.getTokenEnd()) return COMMENT_KINDS.has(kind) ? "comment" : "code";
    }
  }

  function escapeSuspects(file, text) {
    const edits = [];    // [offset, length, replacement], applied from the end
    const refused = [];
    for (const m of text.matchAll(SES_SUSPECT)) {
      const at = m[0] === "<!--" ? m.index : m[0] === "-->" ? m.index + 2 : m.index + m[0].indexOf("import");
      const place = placeOf(file, text, at);
      if (place === "code") {
        const what = m[0].includes("import") ? "import" : m[0];
        refused.push({ message: `${what} outside a string or comment is not allowed in a plugin (SES refuses it)`,
          ...position(file, at) });
      } else if (place === "comment") {
        edits.push([at, 1, text[at] === "i" ? "I" : " "]);
      } else {
        let slashes = 0;   // an already escaped character ("\<") loses its backslash
        while (text[at - 1 - slashes] === "\\") slashes++;
        const back = slashes % 2;
        edits.push([at - back, 1 + back, ESCAPES[text[at]]]);
      }
    }
    let out = text;
    for (let k = edits.length - 1; k >= 0; k--) {
      const [at, length, replacement] = edits[k];
      out = out.slice(0, at) + replacement + out.slice(at + length);
    }
    return { code: out, refused };
  }

  // Where each hook's handler is assigned (middleware.X = ..., globalThis.middleware.X = ...,
  // middleware["X"] = ...), in the author's source: a timeout or a malformed result is reported there.
  function hookPositions(file) {
    const found = {};
    const hookName = (target) => {
      let name = null;
      let owner = null;
      if (ts.isPropertyAccessExpression(target)) { name = target.name.text; owner = target.expression; }
      else if (ts.isElementAccessExpression(target) && ts.isStringLiteralLike(target.argumentExpression)) {
        name = target.argumentExpression.text; owner = target.expression;
      }
      if (owner === null) return null;
      const isMiddleware = (ts.isIdentifier(owner) && owner.text === "middleware")
        || (ts.isPropertyAccessExpression(owner) && owner.name.text === "middleware"
            && ts.isIdentifier(owner.expression) && owner.expression.text === "globalThis");
      return isMiddleware ? name : null;
    };
    const visit = (node) => {
      if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
        const name = hookName(node.left);
        if (name !== null && !(name in found)) found[name] = position(file, node.right.getStart(file));
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
    return found;
  }

  function moduleStatements(file) {
    const errors = [];
    for (const st of file.statements) {
      const isModule = ts.isImportDeclaration(st) || ts.isExportDeclaration(st) || ts.isExportAssignment(st)
        || (ts.canHaveModifiers(st) && (ts.getModifiers(st) || []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword));
      if (isModule) {
        errors.push({ message: "plugins are scripts: import and export are not available; assign handlers to globalThis.middleware", ...position(file, st.getStart(file)) });
      }
    }
    return errors;
  }

  // JavaScript is parsed once and kept as written (a bundle needs no transpiling, and TypeScript's
  // emitter would cost seconds on a large one); TypeScript is transpiled, then its output parsed
  // again so the literal escaping above sees the code that will run.
  globalThis.__compile = (source, fileName) => {
    const typescript = fileName.endsWith(".ts");
    const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, false);
    let errors = [];
    let code = source;
    let sourceMap = null;
    if (typescript) {
      // The source map leads a run-time error's position back to the author's line and column.
      const out = ts.transpileModule(source, {
        fileName,
        reportDiagnostics: true,
        compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, sourceMap: true },
      });
      sourceMap = out.sourceMapText ? JSON.parse(out.sourceMapText) : null;
      errors = (out.diagnostics || []).map((d) => ({
        message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
        ...(d.file && d.start !== undefined ? position(d.file, d.start) : { line: 1, column: 1 }),
      }));
      code = out.outputText.replace(/\n\/\/# sourceMappingURL=\S*\s*$/, "\n").replace(/\nexport \{\};\s*$/, "\n");
    } else {
      errors = file.parseDiagnostics.map((d) => ({ message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
        ...position(file, d.start) }));
    }
    errors.push(...moduleStatements(file), ...dynamicImports(file), ...withStatements(file));
    if (!errors.length) {
      if (code.search(SES_SUSPECT) >= 0) {
        const codeFile = typescript ? ts.createSourceFile("out.js", code, ts.ScriptTarget.ES2022, false) : file;
        const escaped = escapeSuspects(codeFile, code);
        code = escaped.code;
        // (For TypeScript the position is in the transpiled code, which keeps the source's lines.)
        errors.push(...escaped.refused);
      }
    }
    return JSON.stringify({ errors, code, sourceMap, hooksAt: hookPositions(file), hostMembers: hostMembers(file) });
  };
})();
