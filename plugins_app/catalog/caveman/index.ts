// caveman: appends a brevity doctrine to the system prompt, every turn, for every agent.

type Intensity = "lite" | "full" | "ultra";

const MARKER = "[caveman]";

const EXACT = "Code, commands, paths, numbers and error messages stay exact and complete.";

const GUIDANCE: Record<Intensity, string> = {
  lite: "Keep answers short. No filler, no pleasantries, no restating the question.",
  full: "Answer tersely. Few words. No filler. Drop articles and pleasantries where the meaning "
    + "survives; fragments are fine.",
  ultra: "Caveman mode. Fewest words that keep the meaning. No greetings, no hedging, no summaries. "
    + "Lists over prose.",
};

globalThis.middleware.systemPrompt = async (context) => {
  // A platform that composes prompts from earlier output must not get the doctrine twice.
  if (context.systemPrompt.includes(MARKER)) return context.systemPrompt;
  const intensity = host.config.intensity as Intensity;
  return `${context.systemPrompt}\n\n${MARKER} ${GUIDANCE[intensity]} ${EXACT}`;
};
