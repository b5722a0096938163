// agent-audit: one log line per message between agents; secrets never reach the log.

interface AuditConfig {
  redact: boolean;
  previewChars: number;
  replacement: string;
}

globalThis.middleware.interAgentMessage = async (context) => {
  const config = host.config as AuditConfig;
  const redacted = redactSecrets(context.text, config.replacement, true);
  const parts = [
    `agent ${context.senderAgentId} (session ${context.senderSessionId}) -> session ${context.targetSessionId}`,
    context.isSubagentReport ? "subagent report" : "message",
    `${context.text.length} chars`,
  ];
  const found = describeCounts(redacted.counts);
  if (found) parts.push(`secrets: ${found}`);
  if (config.previewChars > 0) {
    const flat = redacted.text.replace(/\s+/g, " ").trim();
    const preview = flat.length > config.previewChars ? `${flat.slice(0, config.previewChars)}...` : flat;
    parts.push(JSON.stringify(preview));
  }
  host.log("info", parts.join(" | "));
  return config.redact ? redacted.text : context.text;
};
