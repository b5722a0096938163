// The chain runner inside V8. Loaded after SES's lockdown() into an engine's shared isolate, which
// holds many accounts: each installation of each account lives in its own Compartment (its own
// globals; the frozen intrinsics are shared). Python drives it with __hub.run / __hub.poll, and
// reads __hub's progress buffer directly, even while a handler keeps the isolate's thread.
(() => {
  "use strict";

  const { freeze } = Object;
  const LEVELS = ["debug", "info", "warn", "error"];
  let table = null;            // hook name -> {mutable, types, nullable, cancellable}
  let limits = null;           // {maxReason, maxValueChars, maxLogs, maxLogChars}
  const plugins = new Map();   // "account/installation id" -> {hash, middleware, config}
  // Many chains are in flight at once: each parks at an await (a host call, a timer) and the
  // isolate runs others meanwhile. Every way into a plugin's code is a call Python posts (start,
  // reply, fire, expire, abandon), each followed by poll(seq), which answers that chain's state and
  // hands Python what its code asked for meanwhile (host calls, timers).
  const runs = new Map();      // run seq -> the chain's state
  let current = null;          // the invocation whose code the isolate's thread runs now
  let invocationSeq = 0;
  const pendingCalls = new Map();   // host call id -> {inv, resolve, reject}
  const pendingTimers = new Map();  // timer id -> {inv, callback, args}
  let nextCall = 0;
  let nextTimer = 0;
  const outbox = [];           // what the running code asked of Python, taken by the next poll
  // guards.js (evaluated before lockdown) bounds native work only while a plugin's invocation holds
  // the thread; this tells it which one does.
  globalThis.__nativeGuards.bind(() => current);

  // Progress, shared with Python without a call: [0] run seq and [1] handler index of the
  // invocation that entered the isolate last (the one holding its thread, while it is busy),
  // [2] length of the checkpoint (UTF-16 units; -1: none or too large), [3] the handler index the
  // checkpoint precedes, [4] the run seq it belongs to; then when that invocation entered (ms since
  // the epoch, a float64). The checkpoint is JSON {context, trace} of a chain before one of its
  // handlers, so a chain whose isolate must be closed goes on from there without running anything twice.
  const PROGRESS_HEADER = 32;
  const CHECKPOINT_UNITS = 2 * 1024 * 1024;
  const progressBuffer = new SharedArrayBuffer(PROGRESS_HEADER + 2 * CHECKPOINT_UNITS);
  const progress = new Int32Array(progressBuffer, 0, 6);
  const handlerStarted = new Float64Array(progressBuffer, 24, 1);
  const checkpointUnits = new Uint16Array(progressBuffer, PROGRESS_HEADER, CHECKPOINT_UNITS);

  function checkpoint(run, index) {
    const text = JSON.stringify({ context: run.current, trace: run.trace });
    progress[2] = -1;
    progress[3] = index;
    progress[4] = run.seq;
    if (text.length > CHECKPOINT_UNITS) return;
    for (let i = 0; i < text.length; i++) checkpointUnits[i] = text.charCodeAt(i);
    progress[2] = text.length;
  }

  // An invocation (re)enters the isolate: from now on, until another enters, the thread is its.
  function enter(inv) {
    current = inv;
    progress[0] = inv.run;
    progress[1] = inv.index;
    handlerStarted[0] = Date.now();
  }

  const keyOf = (account, id) => `${account}/${id}`;
  const clip = (s, n) => (s.length > n ? s.slice(0, n) : s);
  // Text a plugin hands back must be valid Unicode: lone surrogates become U+FFFD, and the
  // record says so (the value still goes on).
  const wellFormed = (s, record) => {
    if (s.isWellFormed()) return s;
    if (record && !record.repaired) record.repaired = true;
    return s.toWellFormed();
  };
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

  // Where the plugin's own code was when it threw: the first stack frame of code evaluated in a
  // compartment ("eval at ..., <anonymous>:LINE:COLUMN"), in the compiled code's lines and columns
  // (Python maps them back to the author's source). Read once, guarded: the thrown value is the plugin's.
  const PLUGIN_FRAME = /eval at <anonymous> \(eval at [^\n]*, <anonymous>:(\d+):(\d+)\)?$/m;
  const thrownAt = (e) => {
    if (e === null || typeof e !== "object") return null;
    try {
      const stack = e.stack;
      if (typeof stack !== "string") return null;
      const m = PLUGIN_FRAME.exec(stack.length > 20000 ? stack.slice(0, 20000) : stack);
      return m ? { line: Number(m[1]), column: Number(m[2]) } : null;
    } catch (ignored) { return null; }   // a hostile getter
  };

  function makeLogger(record) {
    return (level, message) => {
      if (!LEVELS.includes(level)) level = "info";
      if (record.logs.length >= limits.maxLogs) { record.logsDropped += 1; return; }
      record.logs.push({ level, message: wellFormed(clip(safeString(message), limits.maxLogChars), record), at: Date.now() });
    };
  }

  // The host members, from runtime/tables/members.py's one table (handed over by __hub.init): for
  // each, its dotted path, who answers it, the group the host plan may leave out, how its stub reads
  // its arguments and what it makes of the answer.
  let hostMembers = [];
  const cloneJson = (v) => JSON.parse(JSON.stringify(v));
  // How a bridged member's stub reads each argument (members.py's ARG_KINDS), before it crosses to Python.
  const ARG_READERS = freeze({
    string: (v) => safeString(v),
    optionalString: (v) => (v === undefined ? "" : safeString(v)),
    optionalJson: (v) => (v === undefined ? null : cloneJson(v)),
    jsonList: (v) => cloneJson(v ?? []),
  });
  const REST_JSON = "...json";   // every argument from there on, as a JSON copy of the list
  // What a stub makes of the bridge's answer (members.py's RESULT_KINDS).
  const RESULT_WRAPPERS = freeze({
    plain: null,
    response: (r) => harden({
      status: r.status, ok: r.status >= 200 && r.status < 300, headers: r.headers,
      text: async () => r.body, json: async () => JSON.parse(r.body),
    }),
  });
  const ANSWERED_HERE = freeze(["bridge", "log", "config", "plan"]);   // members.py's ANSWERED_BY
  function readHostMembers(membersJson) {
    return freeze(JSON.parse(membersJson).map((m) => {
      if (!ANSWERED_HERE.includes(m.answered)) throw new Error(`host.${m.name}: no way to answer ${m.answered}`);
      for (const kind of m.args) {
        if (kind !== REST_JSON && !Object.hasOwn(ARG_READERS, kind)) throw new Error(`host.${m.name}: no reader for argument kind ${kind}`);
      }
      if (!Object.hasOwn(RESULT_WRAPPERS, m.result)) throw new Error(`host.${m.name}: no wrapper for result kind ${m.result}`);
      return freeze({ ...m, path: freeze(m.name.split(".")), args: freeze(m.args) });
    }));
  }
  const readArgs = (kinds, given) => {
    const args = [];
    for (let i = 0; i < kinds.length; i++) {
      if (kinds[i] === REST_JSON) return args.concat(cloneJson(given.slice(i)));
      args.push(ARG_READERS[kinds[i]](given[i]));
    }
    return args;
  };

  // One host object per invocation, built from the member table: a bridged member is a call into
  // Python, which checks permissions (stale invocations are refused there too); log, config and
  // the host plan's data (host.session.id) are answered here. Nested objects (host.session.peer)
  // come from the dotted names; a group the host plan leaves out (session, workspace, ssh) is absent.
  function makeHost(entry, inv, hostPlan, record) {
    // Python takes the call from the outbox at the next poll and answers it with __hub.reply; one
    // answered after its invocation ended settles never, so none of this plugin's code runs again
    // inside another chain (where it would be blamed on that chain).
    const call = (member, args) => {
      if (inv.over) return Promise.reject(new Error(`host.${member}: this handler's invocation is over`));
      record.hostCalls += 1;
      const id = ++nextCall;
      const text = JSON.stringify({ call: id, run: inv.run, handler: inv.handler, member, args });
      return new Promise((resolve, reject) => {
        pendingCalls.set(id, { inv, resolve, reject });
        inv.calls.add(id);
        outbox.push(text);
      });
    };
    const log = makeLogger(record);
    const stub = (m) => {
      const leaf = m.path[m.path.length - 1];
      const wrap = RESULT_WRAPPERS[m.result];
      // A computed key names the function after its member (host.fetch.name is "fetch").
      return { [leaf]: (...given) => {
        const answer = call(m.name, readArgs(m.args, given));
        return wrap === null ? answer : answer.then(wrap);
      } }[leaf];
    };
    const host = {};
    for (const m of hostMembers) {
      if (m.offered !== "always" && !hostPlan[m.offered]) continue;
      let parent = host;
      for (let i = 0; i < m.path.length - 1; i++) {
        if (!Object.hasOwn(parent, m.path[i])) parent[m.path[i]] = {};
        parent = parent[m.path[i]];
      }
      const leaf = m.path[m.path.length - 1];
      if (m.answered === "bridge") parent[leaf] = stub(m);
      else if (m.answered === "log") parent[leaf] = { [leaf]: (level, message) => log(level, message) }[leaf];
      else if (m.answered === "config") parent[leaf] = entry.config;
      else parent[leaf] = hostPlan[m.offered][leaf];   // "plan": host.session.id is hostPlan.session.id
    }
    return harden(host);
  }

  // ---- Web globals of a compartment (issue 13). Shared values are hardened once per isolate, so
  // a plugin can't change another's copy; the aliases of the global object are the compartment's own.
  let sharedWebGlobals = null;
  function webGlobals() {
    if (sharedWebGlobals === null) {
      const queueMicrotask = (callback) => {
        if (typeof callback !== "function") throw new TypeError("queueMicrotask: the argument must be a function");
        Promise.resolve().then(() => callback());
      };
      // Polyfills (jsassets.web_polyfills_source) set these on the start compartment's global.
      const { TextEncoder, TextDecoder, base64 } = globalThis;
      const btoa = (data) => base64.encode(String(data));
      const atob = (data) => base64.decode(String(data));
      const { structuredClone, URL, URLSearchParams, AbortController, AbortSignal } = globalThis.__webPolyfills;
      // The polyfill's AbortSignal.timeout would start a timer on the isolate's own clock, outliving the
      // invocation (a plugin's setTimeout + controller.abort() does the same within it); it has no
      // AbortSignal.abort(reason), which is added here from its own AbortController.
      delete AbortSignal.timeout;
      // The polyfill dispatches "abort" again on a second abort(); the web API does nothing then.
      const polyfillAbort = AbortController.prototype.abort;
      Object.defineProperty(AbortController.prototype, "abort", { writable: true, configurable: true,
        value: function abort(reason) { if (!this.signal.aborted) polyfillAbort.call(this, reason); } });
      Object.defineProperty(AbortSignal, "abort", { writable: true, configurable: true, value: function abort(reason) {
        const controller = new AbortController();
        controller.abort(reason);
        return controller.signal;
      } });
      sharedWebGlobals = harden({ Intl, queueMicrotask, TextEncoder, TextDecoder, atob, btoa, performance,
        structuredClone: (value, options) => structuredClone(value, options),
        URL, URLSearchParams, AbortController, AbortSignal, crypto: makeCrypto() });
    }
    return sharedWebGlobals;
  }

  // performance.now(): milliseconds since the isolate started, never going back. V8 embedded has no
  // sub-millisecond clock (Date.now and Temporal.Now are both floored to the millisecond), so neither
  // has this; see docs/plugins-authoring.md.
  const timeOrigin = Date.now();
  let lastNow = 0;
  const performance = {
    timeOrigin,
    now() {
      const t = Date.now() - timeOrigin;
      if (t > lastNow) lastNow = t;
      return lastNow;
    },
  };

  // ---- Web Crypto. The isolate has no entropy of its own (Math.random is not one), so Python gives
  // it 32 bytes of os.urandom at start and 32 more with every chain; the generator is SHA-256 in
  // counter mode over a key that every fresh seed is hashed into, rekeyed after each draw so earlier
  // output can't be recomputed from a later state.
  const { digests } = globalThis.__webPolyfills;
  let drbgKey = new Uint8Array(32);
  let drbgCounter = 0;
  let freshSeed = null;   // hashed in at the next draw: most chains never draw, and a hash per chain shows
  function reseed(hex) {
    freshSeed = hex;
  }
  function mixFreshSeed() {
    const hex = freshSeed;
    freshSeed = null;
    const fresh = new Uint8Array(hex.length / 2);
    for (let i = 0; i < fresh.length; i++) fresh[i] = parseInt(hex.substr(i * 2, 2), 16);
    drbgKey = digests["SHA-256"].create().update(drbgKey).update(fresh).digest();
  }
  function randomBytes(length) {
    if (freshSeed !== null) mixFreshSeed();
    const out = new Uint8Array(length);
    const block = new Uint8Array(8);
    for (let offset = 0; offset < length; offset += 32) {
      new DataView(block.buffer).setFloat64(0, drbgCounter++);
      const bytes = digests["SHA-256"].create().update(drbgKey).update(block).digest();
      out.set(length - offset >= 32 ? bytes : bytes.subarray(0, length - offset), offset);
    }
    drbgKey = digests["SHA-256"].create().update(drbgKey).update(new Uint8Array([0x6b])).digest();
    return out;
  }
  // Read through the intrinsic getters, so a subclass or a proxy can't lie about what it is.
  const TypedArrayProto = Object.getPrototypeOf(Uint8Array.prototype);
  const typedArrayName = Object.getOwnPropertyDescriptor(TypedArrayProto, Symbol.toStringTag).get;
  const viewBytes = (view) => {   // a typed array's or a DataView's bytes, without a copy
    const proto = typedArrayName.call(view) !== undefined ? TypedArrayProto : DataView.prototype;
    const get = (name) => Object.getOwnPropertyDescriptor(proto, name).get.call(view);
    return new Uint8Array(get("buffer"), get("byteOffset"), get("byteLength"));
  };
  const INTEGER_ARRAYS = ["Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array",
    "Int32Array", "Uint32Array", "BigInt64Array", "BigUint64Array"];
  function domError(name, message) {
    const e = new Error(message);
    e.name = name;
    return e;
  }
  function bufferSourceCopy(data) {
    try {
      if (ArrayBuffer.isView(data)) return viewBytes(data).slice();
      return new Uint8Array(ArrayBuffer.prototype.slice.call(data, 0));
    } catch (e) {
      throw new TypeError("crypto.subtle.digest: data must be an ArrayBuffer, a typed array or a DataView");
    }
  }
  function makeCrypto() {
    const getRandomValues = (array) => {
      const name = ArrayBuffer.isView(array) ? typedArrayName.call(array) : undefined;
      if (!INTEGER_ARRAYS.includes(name)) {
        throw domError("TypeMismatchError", "crypto.getRandomValues: the argument must be an integer typed array");
      }
      const target = viewBytes(array);
      if (target.length > 65536) {
        throw domError("QuotaExceededError", `crypto.getRandomValues: ${target.length} bytes is over the 65536 limit`);
      }
      target.set(randomBytes(target.length));
      return array;
    };
    const randomUUID = () => {
      const b = randomBytes(16);
      b[6] = (b[6] & 0x0f) | 0x40;
      b[8] = (b[8] & 0x3f) | 0x80;
      const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    };
    const digest = async (algorithm, data) => {
      const name = String(typeof algorithm === "object" && algorithm !== null ? algorithm.name : algorithm).toUpperCase();
      const hash = Object.prototype.hasOwnProperty.call(digests, name) ? digests[name] : undefined;
      if (hash === undefined) throw domError("NotSupportedError", `crypto.subtle.digest: unsupported algorithm ${name}; use SHA-1, SHA-256, SHA-384 or SHA-512`);
      return hash(bufferSourceCopy(data)).slice().buffer;
    };
    return { getRandomValues, randomUUID, subtle: { digest } };
  }

  // `self` and `global` name the compartment's own global object, as `globalThis` does: libraries
  // like lodash find their global through them (Function('return this') is strict code here).
  function aliasGlobalObject(g) {
    for (const name of ["self", "global"]) {
      Object.defineProperty(g, name, { value: g, writable: true, enumerable: false, configurable: true });
    }
  }

  // Timers: Python keeps the clock (the outbox carries each timer, and __hub.fire runs it), so a
  // timer's callback is an entry Python knows of, like every other way into a plugin's code. A
  // callback runs only while the invocation that set it is live; when it ends, its timers go.
  const MAX_TIMERS = 1000;        // pending per invocation
  const MAX_TIMERS_SET = 10000;   // set in all by one invocation (each costs Python a clock entry)
  function timerOwner(entry, what) {
    const inv = current;
    if (inv === null || inv.entry !== entry || inv.over) throw new Error(`${what}: timers run only inside a handler's invocation`);
    return inv;
  }
  function makeTimers(entry) {
    const setTimeout = (callback, delay = 0, ...args) => {
      const inv = timerOwner(entry, "setTimeout");
      if (typeof callback !== "function") throw new TypeError("setTimeout: the callback must be a function");
      if (inv.timers.size >= MAX_TIMERS) throw new RangeError(`setTimeout: over ${MAX_TIMERS} pending timers`);
      if (inv.timersSet >= MAX_TIMERS_SET) throw new RangeError(`setTimeout: over ${MAX_TIMERS_SET} timers in one invocation`);
      inv.timersSet += 1;
      // As on the web, no delay, 0 and a negative delay mean "after the current task": Python
      // fires it once this entry (and its microtasks) is over.
      const ms = Math.max(0, Number(delay) || 0);
      const id = ++nextTimer;
      pendingTimers.set(id, { inv, callback, args });
      inv.timers.add(id);
      outbox.push(`{"timer":${id},"run":${inv.run},"ms":${ms}}`);
      return id;
    };
    const clearTimeout = (id) => {
      const inv = current;
      const timer = pendingTimers.get(id);
      if (timer !== undefined && inv !== null && timer.inv === inv) {
        pendingTimers.delete(id);
        inv.timers.delete(id);
      }
    };
    return harden({ setTimeout, clearTimeout });
  }
  function endInvocation(inv) {
    inv.over = true;
    for (const id of inv.timers) pendingTimers.delete(id);
    inv.timers.clear();
    for (const id of inv.calls) pendingCalls.delete(id);
    inv.calls.clear();
    inv.host = undefined;
    if (current === inv) current = null;
  }
  // Atomics.wait/waitAsync would be ways into a plugin's code (or a block) Python does not know of.
  let sharedAtomics = null;
  function compartmentAtomics() {
    if (sharedAtomics === null) {
      const copy = {};
      for (const name of Object.getOwnPropertyNames(Atomics)) {
        if (name !== "wait" && name !== "waitAsync") copy[name] = Atomics[name];
      }
      sharedAtomics = harden(copy);
    }
    return sharedAtomics;
  }
  // ---- end of web globals

  const floatArrays = Object.fromEntries(["Float16Array", "Float32Array", "Float64Array"]
    .filter((name) => typeof globalThis[name] === "function").map((name) => [name, globalThis[name]]));

  function load(account, id, hash, code, config) {
    const middleware = {};
    const entry = { id, hash, middleware, config: null };
    // FinalizationRegistry is left out: its callbacks would run inside whichever chain is running.
    // The float typed arrays, which SES leaves to the start compartment for the NaN side channel (a
    // NaN's payload bits read back), are given: no value passes between compartments but as JSON,
    // which has no NaN, so there is nobody to signal to; numeric libraries need them.
    const compartment = new Compartment({ __options__: true,
      globals: { Date, Math, FinalizationRegistry: undefined, Atomics: compartmentAtomics(), ...floatArrays, ...webGlobals(),
        ...makeTimers(entry) } });
    const g = compartment.globalThis;
    aliasGlobalObject(g);
    Object.defineProperty(g, "middleware", { value: middleware, writable: false, enumerable: true, configurable: false });
    // The host object of the invocation running now (several of one installation may be in flight),
    // built on first use: most handlers never touch it.
    const currentHost = () => {
      const inv = current;
      if (inv === null || inv.entry !== entry || inv.over) return undefined;
      if (inv.host === undefined) inv.host = inv.makeHost();
      return inv.host;
    };
    Object.defineProperty(g, "host", { get: currentHost, enumerable: true, configurable: false });
    const consoleLog = (level) => (...args) => { const h = currentHost(); if (h) h.log(level, args.map(safeString).join(" ")); };
    g.console = harden({ log: consoleLog("info"), info: consoleLog("info"), debug: consoleLog("debug"),
      warn: consoleLog("warn"), error: consoleLog("error") });
    compartment.evaluate(code);
    const hooks = Object.keys(middleware).filter((k) => typeof middleware[k] === "function");
    entry.config = harden(JSON.parse(JSON.stringify(config ?? {})));
    plugins.set(keyOf(account, id), entry);
    return hooks;
  }

  // Checks a handler's result against the hook; returns {cancel}, {fields}, or {malformed}.
  // The result is read once into plain copies (each property and element read exactly once, so a
  // getter, a proxy trap, a species constructor or a toJSON can't answer differently later), and
  // the copies are what is checked and sent on.
  function interpret(spec, result, inv, record) {
    if (result !== null && (typeof result === "object" || typeof result === "function") && inv.tokens !== null && inv.tokens.has(result)) {
      if (!spec.cancellable) return { malformed: "this hook cannot be cancelled" };
      return { cancel: inv.tokens.get(result) };
    }
    if (spec.mutable.length === 0) return { fields: {} };
    if (result === undefined) return { malformed: "returned undefined; return the value (unchanged to pass through)" };
    if (spec.mutable.length === 1) {
      const name = spec.mutable[0];
      const read = readField(spec, name, result, record);
      return read.problem ? { malformed: read.problem } : { fields: { [name]: read.value } };
    }
    if (result === null || typeof result !== "object" || Array.isArray(result)) {
      return { malformed: `expected an object with some of: ${spec.mutable.join(", ")}` };
    }
    const fields = {};
    const keys = Object.keys(result);
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k];
      if (typeof key !== "string" || !spec.mutable.includes(key)) {
        return { malformed: `field "${safeString(key)}" cannot be changed; changeable: ${spec.mutable.join(", ")}` };
      }
      const value = result[key];
      if (value === undefined) continue;
      const read = readField(spec, key, value, record);
      if (read.problem) return { malformed: read.problem };
      fields[key] = read.value;
    }
    return { fields };
  }

  // {value} (a primitive, or a fresh array of primitives) or {problem}.
  function readField(spec, name, value, record) {
    const type = spec.types[name];
    if (value === null) return spec.nullable.includes(name) ? { value: null } : { problem: `${name}: must not be null` };
    if (type === "string") {
      if (typeof value !== "string") return { problem: `${name}: expected a string, got ${Array.isArray(value) ? "array" : typeof value}` };
      if (value.length > limits.maxValueChars) return { problem: `${name}: ${value.length} characters is over the ${limits.maxValueChars} limit` };
      return { value: wellFormed(value, record) };
    }
    if (type === "string[]") {
      if (!Array.isArray(value)) return { problem: `${name}: expected an array of strings` };
      const length = value.length;
      if (typeof length !== "number" || length > limits.maxValueChars) return { problem: `${name}: expected an array of strings` };
      const copy = [];
      let total = 0;
      for (let i = 0; i < length; i++) {
        const item = value[i];
        if (typeof item !== "string") return { problem: `${name}[${i}]: expected a string` };
        total += item.length;
        if (total > limits.maxValueChars) return { problem: `${name}: over the ${limits.maxValueChars} character limit` };
        copy.push(wellFormed(item, record));
      }
      return { value: copy };
    }
    if (type === "number") {
      const minimum = spec.minimum[name];
      if (minimum !== undefined) {
        if (typeof value !== "number" || !Number.isFinite(value) || value < minimum) return { problem: `${name}: expected a finite number >= ${minimum}` };
      } else if (typeof value !== "number" || !Number.isFinite(value)) return { problem: `${name}: expected a finite number` };
      // What a number holds exactly (Number.MAX_SAFE_INTEGER): 1e308 is finite, and no delay or count.
      if (Math.abs(value) > Number.MAX_SAFE_INTEGER) return { problem: `${name}: ${value} is over ${Number.MAX_SAFE_INTEGER}` };
      return { value };
    }
    if (type === "integer") {
      if (!Number.isSafeInteger(value)) return { problem: `${name}: expected an integer` };
      return { value };
    }
    if (type === "boolean") {
      if (typeof value !== "boolean") return { problem: `${name}: expected true or false` };
      return { value };
    }
    return { problem: `${name}: unsupported type ${type}` };
  }

  async function invoke(entry, req, run, index, context, record) {
    const spec = table[req.hook];
    const inv = { id: ++invocationSeq, run: req.seq, index, handler: entry.id, entry, tokens: null, over: false,
      host: undefined, makeHost: null, timers: new Set(), timersSet: 0, calls: new Set() };
    inv.makeHost = () => makeHost(entry, inv, req.host, record);
    // Object.freeze is harden here: an arrow function has no prototype of its own to reach.
    const tools = spec.cancellable
      ? freeze({ cancel: freeze((reason) => {
          const token = freeze({});
          if (inv.tokens === null) inv.tokens = new WeakMap();
          inv.tokens.set(token, wellFormed(clip(reason === undefined ? "" : safeString(reason), limits.maxReason), record));
          return token;
        }) })
      : NO_TOOLS;
    run.invocation = inv;
    enter(inv);
    try {
      const fn = entry.middleware[req.hook];
      if (typeof fn !== "function") return { malformed: `defines no ${req.hook} handler` };
      const expiry = new Promise((resolve) => { run.expire = resolve; });
      const result = await Promise.race([Promise.resolve(fn(JSON.parse(context), tools)), expiry]);
      if (result === EXPIRED) return { timeout: true, cpuMs: run.expiredCpuMs };
      if (run.invocation !== inv) return { stale: true };
      return interpret(spec, result, inv, record);
    } finally {
      endInvocation(inv);
      if (run.invocation === inv) {
        run.invocation = null;
        run.expire = null;
        run.expiredCpuMs = 0;
      }
    }
  }

  const EXPIRED = harden({});
  const NO_TOOLS = harden({});
  const STALE = harden({});

  // Runs handlers `from` on of a chain; `gen` is the chain's generation: a chain whose handler had
  // to be stopped goes on in a new runChain (abandon), and this one, if it ever wakes, does nothing.
  async function runChain(req, run, from, gen) {
    const spec = table[req.hook];
    for (let i = from; i < req.handlers.length; i++) {
      if (run.gen !== gen) return STALE;
      const h = req.handlers[i];
      const entry = plugins.get(keyOf(req.account, h.id));
      const record = { id: h.id, status: "ran", changed: false, durationMs: 0, warning: null,
        logs: [], logsDropped: 0, hostCalls: 0, repaired: false };
      if (i > 0) checkpoint(run, i);
      run.index = i;
      run.started = Date.now();
      const before = run.current;
      const contextJson = JSON.stringify(before);
      try {
        const out = await invoke(entry, req, run, i, contextJson, record);
        if (run.gen !== gen || out.stale) return STALE;
        if (out.timeout) {
          record.status = "timeout";
          record.warning = out.cpuMs
            ? `used over ${out.cpuMs} ms of CPU (HUB_CPU_MS) and was stopped`
            : `no result within ${req.budgetMs} ms`;
        } else if (out.malformed) {
          record.status = "malformed";
          record.warning = out.malformed;
        } else if (out.cancel !== undefined) {
          record.status = "cancelled";
          run.cancellation = { index: i, reason: out.cancel };
        } else {
          const next = Object.assign({}, before, out.fields);
          record.changed = spec.mutable.some((m) => JSON.stringify(next[m]) !== JSON.stringify(before[m]));
          run.current = next;
        }
      } catch (e) {
        if (run.gen !== gen) return STALE;
        record.status = "error";
        record.warning = wellFormed(clip(describeThrown(e), 1000), record);
        record.at = thrownAt(e);
      }
      if (record.repaired && record.warning === null) {
        record.warning = "text with lone surrogates (not valid Unicode) was repaired with U+FFFD";
      }
      delete record.repaired;
      record.durationMs = Date.now() - run.started;
      if (req.traceValues) record.context = run.current;   // what the next handler sees (try-runs show it)
      run.trace.push(record);
      if (run.cancellation) break;
    }
    return { context: run.current, cancellation: run.cancellation };
  }

  function follow(run, from) {
    const gen = ++run.gen;
    runChain(run.req, run, from, gen).then(
      (r) => { if (r !== STALE && run.gen === gen) run.done = r; },
      (e) => { if (run.gen === gen) run.done = { fatal: describeThrown(e) }; },
    );
  }

  function start(reqJson) {
    const req = JSON.parse(reqJson);
    if (typeof req.entropy === "string") reseed(req.entropy);
    const missing = req.handlers.filter((h) => {
      const entry = plugins.get(keyOf(req.account, h.id));
      return entry === undefined || entry.hash !== h.hash;
    }).map((h) => h.id);
    if (missing.length) {
      runs.set(req.seq, { seq: req.seq, missing });
      return null;
    }
    const run = { seq: req.seq, req, index: -1, started: 0, trace: [], current: req.context, cancellation: null,
      done: null, expire: null, expiredCpuMs: 0, invocation: null, gen: 0 };
    runs.set(req.seq, run);
    progress[0] = req.seq;
    progress[1] = 0;
    follow(run, 0);
    return null;
  }

  function takeOutbox() {
    if (outbox.length === 0) return "";
    const text = outbox.join(",");
    outbox.length = 0;
    return text;
  }

  // The receiver of these calls is JSON text (no script to compile per call): see __hub below.
  const args = (self) => JSON.parse(typeof self === "string" ? self : "[]");

  function poll(seq) {
    const run = runs.get(seq);
    const out = takeOutbox();
    if (run === undefined) return `{"idle":true,"out":[${out}]}`;
    if (run.missing) {
      runs.delete(seq);
      return JSON.stringify({ missing: run.missing });
    }
    if (run.done) {
      runs.delete(seq);
      // What its code asked for after its chain was answered is never served (see makeHost).
      return JSON.stringify({ done: true, trace: run.trace, ...run.done });
    }
    return `{"done":false,"index":${run.index},"started":${run.started},"out":[${out}]}`;
  }

  function expire(seq, index, cpuMs) {
    const run = runs.get(seq);
    if (run && run.index === index && run.expire) {
      run.expiredCpuMs = cpuMs > 0 ? cpuMs : 0;
      run.expire(EXPIRED);
    }
  }

  // Python stopped handler `index` of chain `seq` (terminated its code, which may have left this
  // chain's runChain unable to go on): record it as `record` says and go on from the next handler,
  // on the value before it. Nothing of it runs again.
  function abandon(seq, index, record) {
    const run = runs.get(seq);
    if (run === undefined || run.done || run.index !== index) return;
    if (run.invocation !== null) endInvocation(run.invocation);
    run.invocation = null;
    run.expire = null;
    if (run.req.traceValues) record.context = run.current;
    run.trace.push(record);
    if (index + 1 >= run.req.handlers.length) {
      run.gen += 1;
      run.done = { context: run.current, cancellation: null };
      return;
    }
    follow(run, index + 1);
  }

  globalThis.__hub = harden({
    init(tableJson, limitsJson, seedHex, membersJson) {
      table = JSON.parse(tableJson);
      limits = JSON.parse(limitsJson);
      reseed(seedHex);
      hostMembers = readHostMembers(membersJson);
    },
    // Loads (or reloads) one installation's compiled code; returns the hooks it defines.
    // The installation comes as the receiver, JSON [account, id, hash, code, config]: no script to compile.
    load() {
      progress[0] = 0;   // the harness's own work: no invocation holds the thread
      progress[1] = -1;
      current = null;
      const [account, id, hash, code, config] = JSON.parse(typeof this === "string" ? this : "[]");
      return JSON.stringify(load(account, id, hash, code, config));
    },
    unload(account, id) { plugins.delete(keyOf(account, id)); },
    // The install probe's read of an installation's matcher declaration (middleware.match), as JSON
    // text ("null" when it has none). Plain data only: the hub checks it against the hook table.
    declaredMatch(account, id) {
      const entry = plugins.get(keyOf(account, id));
      const declared = entry === undefined ? undefined : entry.middleware.match;
      return declared === undefined ? "null" : JSON.stringify(declared);
    },
    progressBuffer,
    // Starts a chain; its synchronous part runs now, the rest as microtasks after this call.
    // Python reads the outcome with poll(seq), queued right behind: {missing} if code must be loaded.
    // The request (JSON) is the receiver: the engine calls this rather than evaluating source, so
    // no chain start is a new script to compile.
    run() {
      return start(typeof this === "string" ? this : "");
    },
    // Receiver: the run seq. A chain's state, and what code asked of Python since the last poll.
    poll() {
      return poll(Number(this));
    },
    // Receiver [seq, index, cpuMs]: Python gives up on that handler: its wall-clock budget ran out
    // while it awaited, or (cpuMs > 0) it used that much CPU.
    expire() {
      const [seq, index, cpuMs] = args(this);
      expire(seq, index, cpuMs);
    },
    // Receiver [seq, index, record]: that handler's code was terminated (see abandon above).
    abandon() {
      const [seq, index, record] = args(this);
      abandon(seq, index, record);
    },
    // Receiver [callId, {ok, value, error}]: a host call's answer.
    reply() {
      const [id, reply] = args(this);
      const call = pendingCalls.get(id);
      if (call === undefined) return;
      pendingCalls.delete(id);
      if (call.inv.over) return;
      call.inv.calls.delete(id);
      enter(call.inv);
      if (reply.ok) call.resolve(reply.value);
      else call.reject(new Error(reply.error));
    },
    // Receiver: a timer id whose delay has passed.
    fire() {
      const id = Number(this);
      const timer = pendingTimers.get(id);
      if (timer === undefined) return;
      pendingTimers.delete(id);
      timer.inv.timers.delete(id);
      if (timer.inv.over) return;
      enter(timer.inv);
      try {
        timer.callback(...timer.args);
      } catch (ignored) { /* as on the web: a timer's exception ends only that callback */ }
    },
    // Which chains are in flight (a status and a test's look).
    inFlight() {
      return runs.size;
    },
  });
})();
