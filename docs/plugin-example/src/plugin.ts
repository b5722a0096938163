// A small plugin: trims the agent's replies, vetoes inbound messages that only shout, and logs.
const MAX_REPLY = typeof host.config.maxReply === "number" ? host.config.maxReply : 4000;

middleware.assistantMessageOutbound = async (context) => {
  const text = context.text.trim();
  return text.length > MAX_REPLY ? text.slice(0, MAX_REPLY) + "…" : text;
};

middleware.userMessageInbound = (context, tools) => {
  const letters = context.text.replace(/[^A-Za-z]/g, "");
  if (letters.length > 20 && letters === letters.toUpperCase()) {
    return tools.cancel("please don't shout");
  }
  console.info(`inbound message of ${new TextEncoder().encode(context.text).length} bytes`);
  return context.text;
};

middleware.sshCommandSending = async (context, tools) => {
  if (context.kind === "command" && context.command?.includes("rm -rf /")) return tools.cancel("refused");
  host.log("info", `ssh ${context.kind} on ${context.hostDisplayName}`);
  return {};
};
