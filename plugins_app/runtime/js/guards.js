// Bounds on native work V8 cannot interrupt. TerminateExecution is only noticed at JavaScript
// function entries and loop back-edges, so one builtin call that does all its work in C++ (a sort
// without a comparator, a global replace, a split) keeps the isolate's thread however long it takes:
// measured on this V8, a 32 Mi-element Uint32Array sort held it 10 s after termination, a 16 MiB
// replaceAll 18 s, a 4 Mi-element Array sort 30 s. Evaluated before lockdown(), because the prototypes
// are shared by every compartment and frozen by it; each guard only acts while the harness says a
// plugin's invocation holds the thread (the harness's own work and the compile isolate are untouched).
(() => {
  "use strict";

  // Past these sizes a sort gets a JavaScript comparator that orders exactly as the default one:
  // slower, but each comparison is a function entry where a termination is noticed.
  const TYPED_SORT_NATIVE_MAX = 1 << 20;   // elements (~50 ms native on this machine)
  const ARRAY_SORT_NATIVE_MAX = 1 << 16;   // elements (the default compares as strings: ~100x slower)
  // Strings a plugin may scan or build with one builtin call, in UTF-16 units.
  const STRING_SCAN_MAX = 1 << 20;         // receivers of replace, replaceAll, split, match, matchAll
  const STRING_BUILD_MAX = 1 << 24;        // results of repeat, padStart, padEnd
  // Intl objects one invocation may construct: each holds ICU memory outside V8's heap.
  const INTL_OBJECTS_MAX = 1000;

  let currentInvocation = () => null;   // set once by the harness: the invocation holding the thread
  const intlCounts = new WeakMap();     // invocation -> Intl objects it constructed
  const { apply } = Reflect;
  const { defineProperty, getOwnPropertyDescriptor, getPrototypeOf } = Object;
  const isArray = Array.isArray;

  const replaceMethod = (proto, name, make) => {
    const original = proto[name];
    if (typeof original !== "function") return;
    const guarded = make(original);
    defineProperty(guarded, "name", { value: name });
    defineProperty(guarded, "length", { value: original.length });
    defineProperty(proto, name, { ...getOwnPropertyDescriptor(proto, name), value: guarded });
  };

  // -- sorts ---------------------------------------------------------------------------------------
  // %TypedArray%.prototype.sort's default order: numeric, -0 before +0, NaN last (BigInts compare as numbers).
  const typedOrder = (a, b) => {
    if (a < b) return -1;
    if (a > b) return 1;
    if (a !== a) return b !== b ? 0 : 1;   // NaN
    if (b !== b) return -1;
    if (a === 0 && b === 0) {
      const negA = 1 / a < 0, negB = 1 / b < 0;
      return negA === negB ? 0 : negA ? -1 : 1;
    }
    return 0;
  };
  // Array.prototype.sort's default order: by ToString (undefined and holes never reach the comparator).
  const stringOrder = (a, b) => {
    const x = `${a}`, y = `${b}`;
    return x < y ? -1 : x > y ? 1 : 0;
  };
  const TypedArrayProto = getPrototypeOf(Uint8Array.prototype);
  const typedLength = getOwnPropertyDescriptor(TypedArrayProto, "length").get;
  for (const name of ["sort", "toSorted"]) {
    replaceMethod(TypedArrayProto, name, (original) => function (comparefn) {
      if (comparefn === undefined && currentInvocation() !== null && apply(typedLength, this, []) > TYPED_SORT_NATIVE_MAX) {
        return apply(original, this, [typedOrder]);
      }
      return apply(original, this, [comparefn]);
    });
    replaceMethod(Array.prototype, name, (original) => function (comparefn) {
      if (comparefn === undefined && currentInvocation() !== null && isArray(this) && this.length > ARRAY_SORT_NATIVE_MAX) {
        return apply(original, this, [stringOrder]);
      }
      return apply(original, this, [comparefn]);
    });
  }

  // -- strings -------------------------------------------------------------------------------------
  const refuse = (what, size, max, why) => {
    throw new RangeError(`${what}: ${size} characters is over the ${max} a plugin may ${why} in one call`);
  };
  for (const name of ["replace", "replaceAll", "split", "match", "matchAll"]) {
    replaceMethod(String.prototype, name, (original) => function (...args) {
      if (typeof this === "string" && this.length > STRING_SCAN_MAX && currentInvocation() !== null) {
        refuse(`String.prototype.${name}`, this.length, STRING_SCAN_MAX, "scan");
      }
      return apply(original, this, args);
    });
  }
  replaceMethod(String.prototype, "repeat", (original) => function (count) {
    if (typeof this === "string" && currentInvocation() !== null) {
      const n = Number(count);
      if (this.length * n > STRING_BUILD_MAX) refuse("String.prototype.repeat", this.length * n, STRING_BUILD_MAX, "build");
    }
    return apply(original, this, [count]);
  });
  for (const name of ["padStart", "padEnd"]) {
    replaceMethod(String.prototype, name, (original) => function (maxLength, fillString) {
      if (currentInvocation() !== null && Number(maxLength) > STRING_BUILD_MAX) {
        refuse(`String.prototype.${name}`, Number(maxLength), STRING_BUILD_MAX, "build");
      }
      return apply(original, this, [maxLength, fillString]);
    });
  }

  // normalize and localeCompare hand the whole string to ICU in one call (measured here: NFC of 32 Mi
  // decomposed units held the thread 25 s after termination; a localeCompare of two 64 Mi strings 1.3 s).
  // Both are refused past the scan bound (~45 ms and ~20 ms per Mi units here).
  replaceMethod(String.prototype, "normalize", (original) => function (form) {
    if (typeof this === "string" && this.length > STRING_SCAN_MAX && currentInvocation() !== null) {
      refuse("String.prototype.normalize", this.length, STRING_SCAN_MAX, "scan");
    }
    return apply(original, this, [form]);
  });
  const longer = (a, b) => {
    const x = typeof a === "string" ? a.length : 0, y = typeof b === "string" ? b.length : 0;
    return x > y ? x : y;
  };
  replaceMethod(String.prototype, "localeCompare", (original) => function (that, locales, options) {
    if (currentInvocation() !== null && longer(this, that) > STRING_SCAN_MAX) {
      refuse("String.prototype.localeCompare", longer(this, that), STRING_SCAN_MAX, "scan");
    }
    return apply(original, this, [that, locales, options]);
  });
  // Intl.Collator's compare (a getter giving each collator one bound function) does the same ICU work:
  // each collator's is wrapped once, so `collator.compare === collator.compare` still holds.
  const collatorCompare = getOwnPropertyDescriptor(Intl.Collator.prototype, "compare");
  if (collatorCompare !== undefined && typeof collatorCompare.get === "function") {
    const nativeGet = collatorCompare.get;
    const wrapped = new WeakMap();   // the native bound compare -> its guarded one
    const get = function () {
      const compare = apply(nativeGet, this, []);
      let guarded = wrapped.get(compare);
      if (guarded === undefined) {
        guarded = (a, b) => {
          if (currentInvocation() !== null && longer(a, b) > STRING_SCAN_MAX) {
            refuse("Intl.Collator compare", longer(a, b), STRING_SCAN_MAX, "scan");
          }
          return compare(a, b);
        };
        defineProperty(guarded, "name", { value: "" });
        wrapped.set(compare, guarded);
      }
      return guarded;
    };
    defineProperty(get, "name", { value: "get compare" });
    defineProperty(Intl.Collator.prototype, "compare", { ...collatorCompare, get });
  }

  // -- typed array fill -----------------------------------------------------------------------------
  // One fill writes the whole buffer natively (fresh pages faulted in as it goes: a 512 MiB fill held
  // the thread over a second past termination). Past the bound it is done in slices, each a call where
  // a termination is noticed; the result is the same, and so is the return value.
  const TYPED_FILL_SLICE = 1 << 22;   // elements per native call (~30 ms for 8-byte elements, fresh pages)
  const typedTag = getOwnPropertyDescriptor(TypedArrayProto, Symbol.toStringTag).get;   // the internal kind: unspoofable
  const kinds = { Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
                  Float32Array, Float64Array, BigInt64Array, BigUint64Array };
  if (typeof Float16Array === "function") kinds.Float16Array = Float16Array;
  const { trunc, max: larger, min: smaller } = Math;
  const ToNumber = Number;
  const relative = (value, length, fallback) => {   // start/end as the native fill reads them
    if (value === undefined) return fallback;
    const n = trunc(ToNumber(value)) || 0;
    return n < 0 ? larger(length + n, 0) : smaller(n, length);
  };
  replaceMethod(TypedArrayProto, "fill", (original) => function (value, start, end) {
    const length = currentInvocation() !== null ? apply(typedLength, this, []) : 0;
    const Kind = length > TYPED_FILL_SLICE ? kinds[apply(typedTag, this, [])] : undefined;
    if (Kind === undefined) return apply(original, this, [value, start, end]);
    // The value is converted once, as by the native fill (a valueOf runs once), through an array of
    // the same kind; what it stored is what every slice stores.
    const one = new Kind(1);
    apply(original, one, [value]);
    const converted = one[0];
    const from = relative(start, length, 0), to = relative(end, length, length);
    for (let i = from; i < to; i += TYPED_FILL_SLICE) apply(original, this, [converted, i, smaller(i + TYPED_FILL_SLICE, to)]);
    return this;
  });

  // -- JSON.stringify -----------------------------------------------------------------------------
  // Its output grows with every path through a value, not with the value's size: [o, o] nested 22
  // deep is 44 objects and 4 Mi paths, and V8 writes them all in one native call. So the paths are
  // counted first, in JavaScript (interruptible; data properties only: no getter or toJSON runs twice)
  // and past the bound the call is refused before the native work starts. Each object is visited once
  // and its count of paths kept, so the count costs the value's distinct objects, not its paths: the
  // bomb above is refused after 44 visits, not after walking a quarter of a million paths (which took
  // 100-300 ms of a shared engine per call).
  const JSON_PATHS_MAX = 1 << 18;    // paths one call may write; a plugin's values hold far fewer
  const JSON_OBJECTS_MAX = 1 << 18;  // distinct objects counted before giving up (a walk of ~100 ms)
  const { ownKeys, getOwnPropertyDescriptor: describe } = Reflect;
  const SafeMap = Map;
  const objectChildren = (v) => {
    const kids = [];
    const keys = isArray(v) && getPrototypeOf(v) === Array.prototype ? null : ownKeys(v);
    const count = keys === null ? v.length : keys.length;
    for (let i = 0; i < count; i++) {
      const d = describe(v, keys === null ? i : keys[i]);
      if (d !== undefined && "value" in d && d.value !== null && typeof d.value === "object") kids.push(d.value);
    }
    return kids;
  };
  // Paths through `value` (itself and everything below it, shared parts once per path), capped just
  // past JSON_PATHS_MAX; or past it at once when there are too many distinct objects to count. A cycle
  // adds nothing: stringify refuses cycles itself.
  const countPaths = (value) => {
    const paths = new SafeMap();      // object -> paths through it, once all below it are counted
    const children = new SafeMap();   // object -> its object children, while they are being counted
    const stack = [value];
    while (stack.length > 0) {
      const v = stack[stack.length - 1];
      if (paths.has(v)) { stack.pop(); continue; }
      const kids = children.get(v);
      if (kids === undefined) {       // first visit: count what is below it first
        if (children.size + paths.size >= JSON_OBJECTS_MAX) return JSON_PATHS_MAX + 1;
        const own = objectChildren(v);
        children.set(v, own);
        for (let i = 0; i < own.length; i++) {
          if (!paths.has(own[i]) && !children.has(own[i])) stack.push(own[i]);
        }
        continue;
      }
      let n = 1;
      for (let i = 0; i < kids.length; i++) {
        n += paths.get(kids[i]) ?? 0;   // undefined: an object above it on this walk (a cycle)
        if (n > JSON_PATHS_MAX) break;
      }
      paths.set(v, n > JSON_PATHS_MAX ? JSON_PATHS_MAX + 1 : n);
      children.delete(v);
      stack.pop();
    }
    return paths.get(value);
  };
  replaceMethod(JSON, "stringify", (original) => function (value, replacer, space) {
    if (value !== null && typeof value === "object" && currentInvocation() !== null && countPaths(value) > JSON_PATHS_MAX) {
      throw new RangeError(`JSON.stringify: the value has over ${JSON_PATHS_MAX} objects along its paths`
        + " (shared parts count once per path); a plugin may write at most that many in one call");
    }
    return apply(original, this, [value, replacer, space]);
  });

  // -- Intl ----------------------------------------------------------------------------------------
  // Each constructor is replaced by one that counts, with the same prototype (whose constructor now
  // points at it, so no plugin reaches the uncounted one through an instance).
  for (const name of Object.getOwnPropertyNames(Intl)) {
    const Original = Intl[name];
    if (typeof Original !== "function" || Original.prototype === undefined) continue;
    const Counted = function (...args) {
      const inv = currentInvocation();
      if (inv !== null) {
        const made = (intlCounts.get(inv) ?? 0) + 1;
        if (made > INTL_OBJECTS_MAX) {
          throw new RangeError(`Intl.${name}: over ${INTL_OBJECTS_MAX} Intl objects in one invocation; reuse one`);
        }
        intlCounts.set(inv, made);
      }
      return new.target === undefined ? apply(Original, undefined, args) : Reflect.construct(Original, args, new.target === Counted ? Original : new.target);
    };
    for (const key of Reflect.ownKeys(Original)) {
      if (key === "length" || key === "name" || key === "prototype") {
        if (key !== "prototype") defineProperty(Counted, key, getOwnPropertyDescriptor(Original, key));
        continue;
      }
      defineProperty(Counted, key, getOwnPropertyDescriptor(Original, key));
    }
    defineProperty(Counted, "prototype", { value: Original.prototype, writable: false, enumerable: false, configurable: false });
    defineProperty(Original.prototype, "constructor", { value: Counted, writable: true, enumerable: false, configurable: true });
    defineProperty(Intl, name, { ...getOwnPropertyDescriptor(Intl, name), value: Counted });
  }

  // The harness takes this once (and removes it from the start compartment's global).
  globalThis.__nativeGuards = {
    bind(current) {
      currentInvocation = current;
      delete globalThis.__nativeGuards;
    },
    limits: { TYPED_FILL_SLICE, JSON_PATHS_MAX, TYPED_SORT_NATIVE_MAX, ARRAY_SORT_NATIVE_MAX, STRING_SCAN_MAX, STRING_BUILD_MAX, INTL_OBJECTS_MAX },
  };
})();
