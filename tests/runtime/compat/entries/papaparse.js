import Papa from "papaparse";
globalThis.middleware.userMessageInbound = async (c) => {
  const out = Papa.parse(c.text, { header: true, dynamicTyping: true, skipEmptyLines: true });
  const total = out.data.reduce((sum, row) => sum + row.qty, 0);
  return `${out.data.length} rows, ${total} total, fields ${out.meta.fields.join("/")}; ` + Papa.unparse([["a", "b,c"], [1, 'say "hi"']]);
};
