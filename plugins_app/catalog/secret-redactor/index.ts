// secret-redactor: rewrites SSH output so the model never sees the secrets in it.

interface RedactorConfig {
  replacement: string;
  assignments: boolean;
  extraPatterns: string[];
}

// The config is fixed for the life of this compartment (new settings load a new one).
let extraPatterns: RegExp[] | null = null;

// Only an operation with output to read (an account's extra patterns can match any text, so the
// text itself is not narrowed here).
globalThis.middleware.match = {
  sshCommandCompleted: { any: [{ output: { not: { equals: null } } }, { errorOutput: { not: { equals: null } } }] },
};

globalThis.middleware.sshCommandCompleted = async (context) => {
  const config = host.config as RedactorConfig;
  extraPatterns ??= config.extraPatterns.map((source) => new RegExp(source, "g"));
  const changes: { output?: string; errorOutput?: string } = {};
  const counts: Record<string, number> = {};
  for (const field of ["output", "errorOutput"] as const) {
    const value: string | null = context[field];
    if (value === null) continue;
    const result = redactSecrets(value, config.replacement, config.assignments, extraPatterns);
    if (result.text === value) continue;
    changes[field] = result.text;
    for (const kind of Object.keys(result.counts)) counts[kind] = (counts[kind] ?? 0) + result.counts[kind];
  }
  if (Object.keys(counts).length) {
    host.log("info", `redacted ${describeCounts(counts)} from ${context.kind} on ${context.hostDisplayName}`);
  }
  return changes;
};
