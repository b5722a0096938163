// Entry of the web API polyfills bundle (build-polyfills.sh bundles it into dist/web-polyfills.js).
// It only collects the npm implementations under one start-compartment global; the harness hardens
// them and builds each compartment's globals from them. The packages are pinned in package-lock.json.
import structuredClone from "@ungap/structured-clone";
import URL from "core-js-pure/actual/url/index.js";
import URLSearchParams from "core-js-pure/actual/url-search-params/index.js";
import { AbortController, AbortSignal } from "abortcontroller-polyfill/dist/cjs-ponyfill.js";
import { sha1 } from "@noble/hashes/legacy.js";
import { sha256, sha384, sha512 } from "@noble/hashes/sha2.js";

globalThis.__webPolyfills = {
  structuredClone, URL, URLSearchParams, AbortController, AbortSignal,
  digests: { "SHA-1": sha1, "SHA-256": sha256, "SHA-384": sha384, "SHA-512": sha512 },
};
