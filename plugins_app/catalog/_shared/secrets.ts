// Secret shapes shared by secret-redactor and agent-audit (the catalog prepends this file).

interface SecretRule {
  kind: string;
  pattern: RegExp;
  // Keeps this many leading capture groups (a key, a user name) and redacts the rest.
  keep?: number;
}

interface Redaction {
  text: string;
  counts: Record<string, number>;
}

const SECRET_RULES: readonly SecretRule[] = [
  // Unterminated blocks (truncated output) are redacted to the end of the text.
  { kind: "private key", pattern: /-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----[\s\S]*?(?:-----END \1-----|$)/g },
  { kind: "AWS access key", pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g },
  { kind: "GitHub token", pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b/g },
  { kind: "Slack token", pattern: /\bxox[baprs]-[A-Za-z0-9-]{10,}/g },
  { kind: "Stripe key", pattern: /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b/g },
  { kind: "Google API key", pattern: /\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])/g },
  { kind: "LLM API key", pattern: /\bsk-[A-Za-z0-9_-]{40,}/g },
  { kind: "JWT", pattern: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  { kind: "URL password", pattern: /(\b[a-z][a-z0-9+.-]{0,31}:\/\/[^\s:/@]{1,256}:)[^\s@/]{1,256}(?=@)/gi, keep: 1 },
  { kind: "authorization header", pattern: /(\bauthorization:[ \t]*(?:bearer|basic|token)[ \t]+)[^\s"']+/gi, keep: 1 },
];

// `password=x`, `DB_PASSWORD: "x"`, `"api_key": "x"`: the key must END with one of these words,
// so `max_tokens: 5`, `password_hash = ...` and `PWD=/root` are left alone. Repetitions before
// the secret are bounded: on long output an unbounded one backtracks past the time budget, and
// a handler that times out passes the output through unredacted.
const ASSIGNMENT_RULE: SecretRule = {
  kind: "assignment",
  pattern: /(\b[A-Za-z0-9_.-]{0,64}(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key)["']?[ \t]*[:=][ \t]*)("[^"\r\n]+"|'[^'\r\n]+'|[^\s"',;]+)/gi,
  keep: 1,
};

function redactSecrets(text: string, replacement: string, assignments: boolean,
                       extra: readonly RegExp[] = []): Redaction {
  const counts: Record<string, number> = {};
  const rules: SecretRule[] = [...SECRET_RULES];
  if (assignments) rules.push(ASSIGNMENT_RULE);
  extra.forEach((pattern, i) => rules.push({ kind: `extra pattern ${i + 1}`, pattern }));
  let out = text;
  for (const rule of rules) {
    out = out.replace(rule.pattern, (match: string, ...groups: unknown[]) => {
      const kept = groups.slice(0, rule.keep ?? 0).join("");
      let secret = match.slice(kept.length);
      if (secret === "") return match;
      const quote = rule === ASSIGNMENT_RULE && /^["']/.test(secret) ? secret[0] : "";
      if (quote) secret = secret.slice(1, -1);
      if (secret === replacement) return match;
      counts[rule.kind] = (counts[rule.kind] ?? 0) + 1;
      return kept + quote + replacement + quote;
    });
  }
  return { text: out, counts };
}

function describeCounts(counts: Record<string, number>): string {
  return Object.keys(counts).map((kind) => `${counts[kind]} ${kind}`).join(", ");
}
