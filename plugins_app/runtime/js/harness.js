// The chain runner inside V8. Loaded after SES's lockdown() into every account isolate; each
// installation lives in its own Compartment. Python drives it with __hub.run / __hub.poll.
(() => {
  "use strict";

  const LEVELS = ["debug", "info", "warn", "error"];
  let table = null;            // hook name -> {mutable, types, nullable, cancellable}
  let limits = null;           // {maxReason, maxValueChars, maxLogs, maxLogChars}
  const plugins = new Map();   // installation id -> {hash, middleware, slot, config}
  let run = null;              // the chain in progress, if any
  let invocationSeq = 0;

  const clip = (s, n) => (s.length > n ? s.slice(0, n) : s);
  const safeString = (v) => {
    try { return String(v); } catch (e) { return "[unprintable value]"; }
  };
  const describeThrown = (e) => {
    if (e !== null && typeof e === "object") {
      try {
        const name = typeof e.name === "string" ? e.name : "Error";
        if (typeof e.message === "string") return `${name}: ${e.message}`;
      } catch (ignored) { /* hostile getter */ }
    }
    return `threw ${typeof e}: ${clip(safeString(e), 200)}`;
  };

  function makeLogger(record) {
    return (level, message) => {
      if (!LEVELS.includes(level)) level = "info";
      if (record.logs.length >= limits.maxLogs) { record.logsDropped += 1; return; }
      record.logs.push({ level, message: clip(safeString(message), limits.maxLogChars), at: Date.now() });
    };
  }

  // One host object per invocation. Every member but log/config/session data is a call
  // into Python, which checks permissions; stale invocations are refused there too.
  function makeHost(entry, inv, hostPlan, record) {
    const call = (member, args) => {
      if (inv.over) return Promise.reject(new Error(`host.${member}: this handler's invocation is over`));
      record.hostCalls += 1;
      return __py(JSON.stringify({ run: inv.run, invocation: inv.id, handler: inv.handler, member, args }))
        .then((raw) => {
          const reply = JSON.parse(raw);
          if (reply.ok) return reply.value;
          throw new Error(reply.error);
        });
    };
    const log = makeLogger(record);
    const host = {
      log: (level, message) => log(level, message),
      config: entry.config,
      fetch: (url, init) => call("fetch", [safeString(url), init === undefined ? null : JSON.parse(JSON.stringify(init))])
        .then((r) => harden({
          status: r.status, ok: r.status >= 200 && r.status < 300, headers: r.headers,
          text: async () => r.body, json: async () => JSON.parse(r.body),
        })),
      llm: (...args) => call("llm", JSON.parse(JSON.stringify(args))),
      decide: (question, options) => call("decide", [safeString(question), JSON.parse(JSON.stringify(options ?? []))]),
      agents: { list: () => call("agents.list", []) },
    };
    if (hostPlan.session) {
      const s = hostPlan.session;
      host.session = {
        id: s.id, agentId: s.agentId, kind: s.kind,
        peer: { send: (target, text) => call("session.peer.send", [safeString(target), safeString(text)]) },
        conversation: { read: () => call("session.conversation.read", []) },
      };
    }
    if (hostPlan.workspace) {
      host.workspace = {
        read: (path) => call("workspace.read", [safeString(path)]),
        write: (path, content) => call("workspace.write", [safeString(path), safeString(content)]),
        list: (prefix) => call("workspace.list", [prefix === undefined ? "" : safeString(prefix)]),
        delete: (path) => call("workspace.delete", [safeString(path)]),
      };
    }
    if (hostPlan.ssh) {
      host.ssh = {
        command: (command, options) => call("ssh.command", [safeString(command), options === undefined ? null : JSON.parse(JSON.stringify(options))]),
      };
    }
    return harden(host);
  }

  function load(id, hash, code, config) {
    const middleware = {};
    const slot = { host: undefined, make: null };
    const compartment = new Compartment({ __options__: true, globals: { Date, Math } });
    const g = compartment.globalThis;
    Object.defineProperty(g, "middleware", { value: middleware, writable: false, enumerable: true, configurable: false });
    // The host object is built on first use in an invocation: most handlers never touch it.
    const currentHost = () => {
      if (slot.host === undefined && slot.make !== null) { slot.host = slot.make(); slot.make = null; }
      return slot.host;
    };
    Object.defineProperty(g, "host", { get: currentHost, enumerable: true, configurable: false });
    const consoleLog = (level) => (...args) => { const h = currentHost(); if (h) h.log(level, args.map(safeString).join(" ")); };
    g.console = harden({ log: consoleLog("info"), info: consoleLog("info"), debug: consoleLog("debug"),
      warn: consoleLog("warn"), error: consoleLog("error") });
    compartment.evaluate(code);
    const hooks = Object.keys(middleware).filter((k) => typeof middleware[k] === "function");
    plugins.set(id, { id, hash, middleware, slot, config: harden(JSON.parse(JSON.stringify(config ?? {}))) });
    return hooks;
  }

  // Checks a handler's result against the hook; returns {cancel}, {fields}, or {malformed}.
  function interpret(spec, result, inv) {
    if (result !== null && (typeof result === "object" || typeof result === "function") && inv.tokens.has(result)) {
      if (!spec.cancellable) return { malformed: "this hook cannot be cancelled" };
      return { cancel: inv.tokens.get(result) };
    }
    if (spec.mutable.length === 0) return { fields: {} };
    if (result === undefined) return { malformed: "returned undefined; return the value (unchanged to pass through)" };
    if (spec.mutable.length === 1) {
      const name = spec.mutable[0];
      const problem = checkField(spec, name, result);
      return problem ? { malformed: problem } : { fields: { [name]: copyValue(result) } };
    }
    if (result === null || typeof result !== "object" || Array.isArray(result)) {
      return { malformed: `expected an object with some of: ${spec.mutable.join(", ")}` };
    }
    const fields = {};
    for (const key of Object.keys(result)) {
      if (!spec.mutable.includes(key)) return { malformed: `field "${key}" cannot be changed; changeable: ${spec.mutable.join(", ")}` };
      const value = result[key];
      if (value === undefined) continue;
      const problem = checkField(spec, key, value);
      if (problem) return { malformed: problem };
      fields[key] = copyValue(value);
    }
    return { fields };
  }

  function checkField(spec, name, value) {
    const type = spec.types[name];
    if (value === null) return spec.nullable.includes(name) ? null : `${name}: must not be null`;
    if (type === "string") {
      if (typeof value !== "string") return `${name}: expected a string, got ${Array.isArray(value) ? "array" : typeof value}`;
      if (value.length > limits.maxValueChars) return `${name}: ${value.length} characters is over the ${limits.maxValueChars} limit`;
      return null;
    }
    if (type === "string[]") {
      if (!Array.isArray(value)) return `${name}: expected an array of strings`;
      let total = 0;
      for (let i = 0; i < value.length; i++) {
        if (typeof value[i] !== "string") return `${name}[${i}]: expected a string`;
        total += value[i].length;
      }
      if (total > limits.maxValueChars) return `${name}: ${total} characters is over the ${limits.maxValueChars} limit`;
      return null;
    }
    if (type === "number") {
      if (typeof value !== "number" || !Number.isFinite(value) || value < 0) return `${name}: expected a finite number >= 0`;
      return null;
    }
    return `${name}: unsupported type ${type}`;
  }

  const copyValue = (v) => (Array.isArray(v) ? v.slice() : v);

  async function invoke(entry, req, context, record) {
    const spec = table[req.hook];
    const inv = { id: ++invocationSeq, run: req.seq, handler: entry.id, tokens: new WeakMap(), over: false };
    const tools = spec.cancellable
      ? harden({ cancel: (reason) => {
          const token = harden({});
          inv.tokens.set(token, clip(reason === undefined ? "" : safeString(reason), limits.maxReason));
          return token;
        } })
      : harden({});
    entry.slot.host = undefined;
    entry.slot.make = () => makeHost(entry, inv, req.host, record);
    run.invocation = inv.id;
    try {
      const fn = entry.middleware[req.hook];
      if (typeof fn !== "function") return { malformed: `defines no ${req.hook} handler` };
      const expiry = new Promise((resolve) => { run.expire = resolve; });
      const result = await Promise.race([Promise.resolve(fn(JSON.parse(context), tools)), expiry]);
      if (result === EXPIRED) return { timeout: true };
      return interpret(spec, result, inv);
    } finally {
      inv.over = true;
      entry.slot.host = undefined;
      entry.slot.make = null;
      run.expire = null;
    }
  }

  const EXPIRED = harden({});

  async function runChain(req) {
    const spec = table[req.hook];
    let current = req.context;
    let cancellation = null;
    for (let i = 0; i < req.handlers.length; i++) {
      const h = req.handlers[i];
      const entry = plugins.get(h.id);
      const record = { id: h.id, status: "ran", changed: false, durationMs: 0, warning: null,
        logs: [], logsDropped: 0, hostCalls: 0 };
      run.index = i;
      run.started = Date.now();
      const contextJson = JSON.stringify(current);
      run.contextJson = contextJson;
      try {
        const out = await invoke(entry, req, contextJson, record);
        if (out.timeout) {
          record.status = "timeout";
          record.warning = `no result within ${req.budgetMs} ms`;
        } else if (out.malformed) {
          record.status = "malformed";
          record.warning = out.malformed;
        } else if (out.cancel !== undefined) {
          record.status = "cancelled";
          cancellation = { index: i, reason: out.cancel };
        } else {
          const next = Object.assign({}, current, out.fields);
          record.changed = spec.mutable.some((m) => JSON.stringify(next[m]) !== JSON.stringify(current[m]));
          current = next;
        }
      } catch (e) {
        record.status = "error";
        record.warning = clip(describeThrown(e), 1000);
      }
      record.durationMs = Date.now() - run.started;
      if (req.traceValues) record.context = current;   // what the next handler sees (try-runs show it)
      run.trace.push(record);
      if (cancellation) break;
    }
    return { context: current, cancellation };
  }

  globalThis.__hub = harden({
    init(tableJson, limitsJson) {
      table = JSON.parse(tableJson);
      limits = JSON.parse(limitsJson);
    },
    // Loads (or reloads) one installation's compiled code; returns the hooks it defines.
    load(id, hash, code, configJson) {
      return JSON.stringify(load(id, hash, code, JSON.parse(configJson)));
    },
    unload(id) { plugins.delete(id); },
    // Starts a chain; its synchronous part runs now, the rest as microtasks after this eval.
    // Python reads the outcome with poll(), queued right behind: {missing} if code must be loaded.
    run(reqJson) {
      const req = JSON.parse(reqJson);
      const missing = req.handlers.filter((h) => !plugins.has(h.id) || plugins.get(h.id).hash !== h.hash).map((h) => h.id);
      if (missing.length) {
        run = { missing };
        return null;
      }
      run = { index: -1, started: 0, trace: [], done: null, expire: null, invocation: 0, contextJson: null };
      runChain(req).then(
        (r) => { run.done = r; },
        (e) => { run.done = { fatal: describeThrown(e) }; },
      );
      return null;
    },
    poll() {
      if (run === null) return JSON.stringify({ idle: true });
      if (run.missing) {
        const out = JSON.stringify({ missing: run.missing });
        run = null;
        return out;
      }
      if (run.done) {
        const out = JSON.stringify({ done: true, trace: run.trace, ...run.done });
        run = null;
        return out;
      }
      return JSON.stringify({ done: false, index: run.index, started: run.started, invocation: run.invocation });
    },
    // After Python terminated a handler stuck in synchronous code: what ran, and where to resume.
    abandon() {
      if (run === null) return JSON.stringify({ idle: true });
      const out = JSON.stringify({ index: run.index, trace: run.trace, contextJson: run.contextJson, started: run.started });
      run = null;
      return out;
    },
    // Python gives up on the current handler (its wall-clock budget ran out while it awaited).
    expire(invocation) {
      if (run && run.invocation === invocation && run.expire) run.expire(EXPIRED);
    },
  });
})();
