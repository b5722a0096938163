// rate-limit: at most `messages` person's messages per window, per session or per agent.
// The count lives in host.kv, not in module state: module state is one engine's, lost when the
// engine is replaced, so a limit kept there would let through as many messages as there are engines.

interface Settings { messages: number; windowSeconds: number; per: "session" | "agent" }

function scopeOf(per: Settings["per"], sessionId: string): string {
  // host.session.agentId needs host:session; without it (or without an agent) a session is counted alone.
  if (per === "agent") {
    try {
      const agentId = host.session?.agentId;
      if (agentId) return `agent:${agentId}`;
    } catch {
      // not granted: fall back to the session
    }
  }
  return `session:${sessionId}`;
}

globalThis.middleware.userMessageInbound = async (context, tools) => {
  const { messages, windowSeconds, per } = host.config as Settings;
  const nowSeconds = Date.now() / 1000;
  // Fixed windows on the clock: every engine agrees on the window without talking to the others,
  // and the key of a past window simply expires.
  const windowStart = Math.floor(nowSeconds / windowSeconds) * windowSeconds;
  const key = `rate:${scopeOf(per, context.sessionId)}:${windowStart}`;
  const counted = await host.kv.incr(key, 1, { ttlSeconds: windowSeconds, max: messages });
  if (typeof counted === "number") return context.text;
  const retryAt = windowStart + windowSeconds;
  const wait = Math.max(1, Math.ceil(retryAt - nowSeconds));
  const whose = per === "agent" ? "agent" : "session";
  return tools.cancel(`rate limit: ${messages} messages per ${windowSeconds} s for this ${whose}; ` +
                      `retry in ${wait} s (at ${new Date(retryAt * 1000).toISOString()})`);
};
