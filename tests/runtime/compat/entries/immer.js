import { produce } from "immer";
globalThis.middleware.userMessageInbound = async (c) => {
  const base = JSON.parse(c.text);
  const next = produce(base, (draft) => { draft.todos.push({ title: "new", done: false }); draft.todos[0].done = true; });
  return JSON.stringify({ next, baseUnchanged: base.todos.length === 1 && base.todos[0].done === false,
    sharedUntouched: next.meta === base.meta, frozen: Object.isFrozen(next) });
};
