// rm-guard: vetoes commands that destroy a server, and makes apt-get install non-interactive.

interface Word { text: string; start: number; end: number }

interface Script {
  commands: Word[][];   // simple commands, split at ; & | && || newlines ( ) and backticks
  redirects: string[];  // targets of > and >>
  nested: string[];     // $(...) and `...` found inside double quotes
}

// Words that may precede the real command name, and how many option arguments they take.
const PREFIXES = new Map<string, RegExp | null>([
  ["sudo", /^-[ugCDhpRrTtU]$|^--(?:user|group|chdir|host|prompt|role|type|close-from|other-user)$/],
  ["doas", /^-[uC]$/],
  ["env", /^-[uCS]$|^--(?:unset|chdir|split-string)$/],
  ["nice", /^-n$|^--adjustment$/],
  ["ionice", /^-[cnp]$/],
  ["timeout", /^-[sk]$|^--(?:signal|kill-after)$/],
  ["stdbuf", /^-[ioe]$/],
  ...["nohup", "time", "exec", "command", "builtin", "busybox"].map((name) => [name, null] as [string, null]),
]);
const KEYWORDS = new Set(["{", "}", "!", "if", "then", "else", "elif", "do", "while", "until"]);
const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ksh", "ash"]);
const DISK = /^\/dev\/(?:(?:sd|hd|vd|xvd)[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|disk\d|disk\/|mapper\/)/;
const FORK_BOMB = /([A-Za-z_:.][\w:.-]{0,63})\s*\(\s*\)\s*\{\s*\1\s*\|\s*\1\s*&\s*;?\s*\}/;
const MAX_DEPTH = 3;

function parse(source: string): Script {
  const script: Script = { commands: [], redirects: [], nested: [] };
  let command: Word[] = [];
  let text = "";
  let start = -1;
  let redirect: ">" | "<" | null = null;   // the next word is the target of this redirection
  const endWord = (end: number) => {
    if (start >= 0) {
      if (redirect === ">") script.redirects.push(text);
      else if (redirect === null) command.push({ text, start, end });
      redirect = null;
    }
    text = "";
    start = -1;
  };
  const endCommand = (end: number) => {
    endWord(end);
    redirect = null;
    if (command.length) script.commands.push(command);
    command = [];
  };
  const begin = (i: number) => { if (start < 0) start = i; };
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    if (c === " " || c === "\t") { endWord(i); i++; continue; }
    if ("\n;&|()`".includes(c)) { endCommand(i); i++; continue; }
    if (c === ">" || c === "<") {
      if (/^\d+$/.test(text)) { text = ""; start = -1; } else endWord(i);
      while (i < source.length && ">&|<".includes(source[i])) i++;
      redirect = c;
      continue;
    }
    if (c === "#" && start < 0) {
      while (i < source.length && source[i] !== "\n") i++;
      continue;
    }
    if (c === "\\") {
      if (source[i + 1] === "\n") { i += 2; continue; }
      begin(i);
      text += source[i + 1] ?? "";
      i += 2;
      continue;
    }
    if (c === "'") {
      begin(i);
      const close = source.indexOf("'", i + 1);
      const stop = close < 0 ? source.length : close;
      text += source.slice(i + 1, stop);
      i = stop + 1;
      continue;
    }
    if (c === '"') {
      begin(i);
      i++;
      while (i < source.length && source[i] !== '"') {
        if (source[i] === "\\" && i + 1 < source.length) { text += source[i + 1]; i += 2; continue; }
        const inner = substitution(source, i);
        if (inner) { script.nested.push(inner.text); text += source.slice(i, inner.end); i = inner.end; continue; }
        text += source[i];
        i++;
      }
      i++;
      continue;
    }
    begin(i);
    text += c;
    i++;
  }
  endCommand(source.length);
  return script;
}

// A $(...) or `...` starting at i, with the index just past it.
function substitution(source: string, i: number): { text: string; end: number } | null {
  if (source[i] === "`") {
    const close = source.indexOf("`", i + 1);
    const end = close < 0 ? source.length : close;
    return { text: source.slice(i + 1, end), end: Math.min(source.length, end + 1) };
  }
  if (source[i] !== "$" || source[i + 1] !== "(") return null;
  let depth = 0;
  for (let j = i + 1; j < source.length; j++) {
    if (source[j] === "(") depth++;
    else if (source[j] === ")" && --depth === 0) return { text: source.slice(i + 2, j), end: j + 1 };
  }
  return { text: source.slice(i + 2), end: source.length };
}

// The index of the command name, past assignments, keywords and wrappers like sudo.
function commandIndex(words: Word[]): number {
  let i = 0;
  while (i < words.length) {
    const word = words[i].text;
    const name = basename(word);
    if (KEYWORDS.has(word) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(word)) { i++; continue; }
    if (!PREFIXES.has(name)) return i;
    const takesArgument = PREFIXES.get(name);
    i++;
    while (i < words.length && words[i].text.startsWith("-")) {
      if (name === "command" && /^-[vV]$/.test(words[i].text)) return words.length;   // a lookup
      i += takesArgument && takesArgument.test(words[i].text) ? 2 : 1;
    }
    if (name === "timeout" && i < words.length) i++;   // the duration
  }
  return i;
}

function basename(word: string): string {
  return word.slice(word.lastIndexOf("/") + 1);
}

function normalize(path: string): string {
  let p = path.replace(/\/+/g, "/").replace(/^\$\{HOME\}/, "$HOME");
  for (;;) {
    const shorter = p.replace(/\/(?:\.\.?|\*|\.\*)?$/, "");
    if (shorter === p) break;
    p = shorter;
  }
  return p === "" ? "/" : p;
}

function checkRm(args: string[], protectedPaths: Set<string>): string | null {
  let recursive = false;
  let operands: string[] = [];
  let optionsOver = false;
  for (const arg of args) {
    if (!optionsOver && arg === "--") { optionsOver = true; continue; }
    if (!optionsOver && arg.startsWith("--")) {
      if (arg === "--no-preserve-root") return "rm --no-preserve-root";
      if (arg === "--recursive") recursive = true;
      continue;
    }
    if (!optionsOver && arg.length > 1 && arg.startsWith("-")) {
      if (/[rR]/.test(arg)) recursive = true;
      continue;
    }
    operands.push(arg);
  }
  if (!recursive) return null;
  operands = operands.map(normalize);
  const hit = operands.find((p) => p === "/" || protectedPaths.has(p));
  return hit === undefined ? null : `recursive delete of ${hit}`;
}

function danger(source: string, protectedPaths: Set<string>, depth: number): string | null {
  if (FORK_BOMB.test(source)) return "a fork bomb";
  const script = parse(source);
  const disk = script.redirects.find((target) => DISK.test(target));
  if (disk) return `a redirection onto disk device ${disk}`;
  const inner: string[] = [...script.nested];
  for (const words of script.commands) {
    const at = commandIndex(words);
    if (at >= words.length) continue;
    const name = basename(words[at].text);
    const args = words.slice(at + 1).map((w) => w.text);
    if (name === "rm") {
      const why = checkRm(args, protectedPaths);
      if (why) return why;
    } else if (/^mkfs(?:\..+)?$|^mke2fs$/.test(name)) {
      return `${name} (formats a filesystem)`;
    } else if (name === "dd") {
      const target = args.find((a) => a.startsWith("of=") && DISK.test(a.slice(3)));
      if (target) return `dd onto disk device ${target.slice(3)}`;
    } else if (name === "eval") {
      inner.push(args.join(" "));
    } else if (SHELLS.has(name) || name === "su") {
      const flag = args.findIndex((a) => /^-[a-zA-Z]*c[a-zA-Z]*$/.test(a) || a === "--command");
      if (flag >= 0 && flag + 1 < args.length) inner.push(args[flag + 1]);
    }
  }
  if (depth < MAX_DEPTH) {
    for (const text of inner) {
      const why = danger(text, protectedPaths, depth + 1);
      if (why) return why;
    }
  }
  return null;
}

const YES = /^-[a-zA-Z]*y[a-zA-Z]*$|^--(?:yes|assume-yes|force-yes)$|Assume-Yes=(?:true|yes|1)$/i;

// Inserts " -y" after each `apt-get install` / `apt install` that has no yes flag.
function assumeYes(source: string): string {
  const inserts: number[] = [];
  for (const words of parse(source).commands) {
    const at = commandIndex(words);
    if (at >= words.length || !["apt-get", "apt"].includes(basename(words[at].text))) continue;
    const rest = words.slice(at + 1);
    const takesValue = (i: number) => i > 0 && /^-o$|^--option$/.test(rest[i - 1].text);
    const sub = rest.findIndex((w, i) => !w.text.startsWith("-") && !takesValue(i));
    if (sub < 0 || rest[sub].text !== "install") continue;
    if (rest.some((w) => YES.test(w.text))) continue;
    inserts.push(rest[sub].end);
  }
  let out = source;
  for (const at of inserts.reverse()) out = `${out.slice(0, at)} -y${out.slice(at)}`;
  return out;
}

// Only shell commands concern it: file operations are left out before the handler starts. Nothing
// narrower is declared on purpose: a text test (say, "contains rm") is what quoting ('r'm) and
// substitutions get past; the parser above is what decides.
globalThis.middleware.match = { sshCommandSending: { kind: { equals: "command" } } };

globalThis.middleware.sshCommandSending = async (context, tools) => {
  if (context.kind !== "command" || !context.command) return {};
  const config = host.config as { assumeYes: boolean; protectedPaths: string[] };
  const protectedPaths = new Set(config.protectedPaths.map(normalize));
  const why = danger(context.command, protectedPaths, 0);
  if (why) {
    const shown = context.command.length > 200 ? `${context.command.slice(0, 200)}...` : context.command;
    return tools.cancel(`rm-guard refused ${why}: ${shown}`);
  }
  if (!config.assumeYes) return {};
  const command = assumeYes(context.command);
  return command === context.command ? {} : { command };
};
