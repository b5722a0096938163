import { z } from "zod";
const Order = z.object({ id: z.string().uuid(), qty: z.number().int().positive(), email: z.string().email() });
globalThis.middleware.userMessageInbound = async (c) => {
  const parsed = Order.safeParse(JSON.parse(c.text));
  if (parsed.success) return "ok " + parsed.data.qty;
  return "invalid " + parsed.error.issues.map((i) => i.path.join(".")).sort().join(",");
};
