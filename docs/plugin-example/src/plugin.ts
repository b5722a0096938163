// A small plugin: trims the agent's replies, vetoes (and reports, with a secret) inbound messages
// that only shout, and logs the shell commands it sees (a matcher leaves file operations out before
// its handler starts).
const MAX_REPLY = typeof host.config.maxReply === "number" ? host.config.maxReply : 4000;

middleware.assistantMessageOutbound = async (context) => {
  const text = context.text.trim();
  return text.length > MAX_REPLY ? text.slice(0, MAX_REPLY) + "…" : text;
};

middleware.userMessageInbound = async (context, tools) => {
  const letters = context.text.replace(/[^A-Za-z]/g, "");
  if (letters.length > 20 && letters === letters.toUpperCase()) {
    // MODERATION_TOKEN is an account secret: the hub puts its value in as the request leaves, only
    // for a host its allowedHosts names; this code (and anything it logs) only sees the placeholder.
    await host.fetch("https://moderation.example.com/v1/flags", {
      method: "POST",
      headers: { Authorization: "Bearer {{secret.MODERATION_TOKEN}}", "Content-Type": "application/json" },
      body: JSON.stringify({ sessionId: context.sessionId, reason: "shouting" }),
    }).catch((e) => console.warn(`could not flag: ${e}`));
    return tools.cancel("please don't shout");
  }
  console.info(`inbound message of ${new TextEncoder().encode(context.text).length} bytes`);
  return context.text;
};

middleware.match = { sshCommandSending: { kind: { equals: "command" } } };

middleware.sshCommandSending = async (context, tools) => {
  if (context.command?.includes("rm -rf /")) return tools.cancel("refused");
  host.log("info", `ssh ${context.kind} on ${context.hostDisplayName}`);
  return {};
};
