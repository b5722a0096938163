// Type checking a TypeScript plugin against the SDK (middleware.d.ts) and the ES2022 library, in the
// compiler's isolate. One language service lives as long as the isolate: the library's and the SDK's
// SourceFiles are parsed and bound once, and each check only parses and checks the plugin's file.
// The options are docs/plugin-example/tsconfig.json's, so a local `tsc` and the hub agree.
(() => {
  "use strict";
  const LIB_DIR = "/lib/";
  const SDK = "/sdk/middleware.d.ts";
  const PLUGIN = "/plugin.ts";
  const options = {
    target: ts.ScriptTarget.ES2022, lib: ["lib.es2022.d.ts"], types: [], strict: true, noEmit: true,
    skipLibCheck: true, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler,
    noResolve: true,
  };
  const texts = new Map();      // file name -> text (the library files, the SDK)
  const versions = new Map();   // file name -> version string
  let plugin = "";
  let pluginVersion = 0;
  let service = null;

  const snapshot = (name) => {
    const text = name === PLUGIN ? plugin : texts.get(name);
    return text === undefined ? undefined : ts.ScriptSnapshot.fromString(text);
  };

  function makeService() {
    const host = {
      getCompilationSettings: () => options,
      getScriptFileNames: () => [SDK, PLUGIN],
      getScriptVersion: (name) => (name === PLUGIN ? String(pluginVersion) : versions.get(name) || "0"),
      getScriptSnapshot: snapshot,
      getCurrentDirectory: () => "/",
      getDefaultLibFileName: () => LIB_DIR + "lib.es2022.d.ts",
      getDefaultLibLocation: () => LIB_DIR,
      fileExists: (name) => name === PLUGIN || texts.has(name),
      readFile: (name) => (name === PLUGIN ? plugin : texts.get(name)),
      directoryExists: (name) => name === "/" || name === "/lib" || name === "/sdk",
      getDirectories: () => [],
      useCaseSensitiveFileNames: () => true,
    };
    return ts.createLanguageService(host, ts.createDocumentRegistry());
  }

  const position = (d) => {
    if (!d.file || d.start === undefined) return { line: 1, column: 1 };
    const lc = d.file.getLineAndCharacterOfPosition(d.start);
    return { line: lc.line + 1, column: lc.character + 1 };
  };

  // Library files come from Python once ({name: text}); the SDK whenever it changes (its hash is its version).
  globalThis.__typecheckInit = (libsJson) => {
    for (const [name, text] of Object.entries(JSON.parse(libsJson))) {
      texts.set(LIB_DIR + name, text);
      versions.set(LIB_DIR + name, "1");
    }
    return true;
  };
  globalThis.__typecheckSdk = (sdkText, sdkVersion) => {
    texts.set(SDK, sdkText);
    versions.set(SDK, sdkVersion);
    return true;
  };

  // The plugin's syntax and type errors, [{message, line, column, code}], at most `limit` of them.
  globalThis.__typecheck = (source, limit) => {
    if (service === null) service = makeService();
    plugin = source;
    pluginVersion += 1;
    const found = [...service.getSyntacticDiagnostics(PLUGIN)];
    if (!found.length) found.push(...service.getSemanticDiagnostics(PLUGIN));
    const errors = found.filter((d) => d.category === ts.DiagnosticCategory.Error).slice(0, limit).map((d) => ({
      message: ts.flattenDiagnosticMessageText(d.messageText, "\n"), ...position(d), code: d.code,
    }));
    return JSON.stringify(errors);
  };
})();
