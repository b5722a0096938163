import { createTwoFilesPatch, diffWords } from "diff";
globalThis.middleware.userMessageInbound = async (c) => {
  const [a, b] = c.text.split("\n---\n");
  const words = diffWords(a, b).filter((p) => p.added || p.removed).map((p) => (p.added ? "+" : "-") + p.value.trim());
  return words.join(" ") + "\n" + createTwoFilesPatch("a.txt", "b.txt", a + "\n", b + "\n", "", "", { context: 0 });
};
