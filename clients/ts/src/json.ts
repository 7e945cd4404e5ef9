// Lossless JSON (docs/sdk.md#typescript-dshqharness).
//
// The stream keeps every record as it was written: key order, number
// spellings and escapes survive (docs/protocol.md#2-the-session-log-stream).
// JavaScript's JSON.parse loses what a double cannot hold (12345678901234567890,
// 1.0, 1e3 read back as other text), so records are read with parseJson, which
// keeps such a number as a JsonNumber holding its exact text, and written with
// stringifyJson, JSON.stringify's output (compact, insertion order, raw UTF-8,
// lone surrogates escaped) plus JsonNumber's text, refusing anything that is
// not lossless JSON as upstream does (a TypeError).

/** A JSON number whose exact text a JavaScript number cannot hold. */
export class JsonNumber {
  readonly text: string;
  constructor(text: string) {
    if (typeof text !== "string" || !numberRe.test(text)) {
      throw new TypeError(`JsonNumber: ${JSON.stringify(text)} is not a JSON number`);
    }
    if (/^-0(\.0*)?([eE][+-]?\d+)?$/.test(text)) {
      throw new TypeError("JsonNumber: -0 is not losslessly JSON-serializable");
    }
    this.text = text;
  }
  /** The nearest double (lossy). */
  valueOf(): number {
    return Number(this.text);
  }
  toString(): string {
    return this.text;
  }
}

const numberRe = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

/** JsonValue is what parseJson returns and stringifyJson accepts. */
export type JsonValue = null | boolean | number | string | JsonNumber | JsonValue[] | { [key: string]: JsonValue };

/** MaxDepth bounds nesting, as the Go record reader does. */
export const MaxDepth = 512;

/** JsonSyntaxError is a text that is not one JSON value we can keep. */
export class JsonSyntaxError extends SyntaxError {
  override name = "JsonSyntaxError";
}

/**
 * parseJson reads one JSON text. Numbers whose text is what JavaScript would
 * write for the same double are numbers; every other number is a JsonNumber
 * with its exact text. Duplicate keys, -0 and nesting deeper than MaxDepth
 * are refused (they cannot round-trip), as is anything after the value.
 */
export function parseJson(text: string): JsonValue {
  return new Parser(text, false).document().value;
}

/**
 * parseRecord reads one record and returns its value with its compact text
 * (insignificant whitespace removed, every token kept as written), which the
 * persistence backend publishes unchanged when the value is appended as it
 * was read (rawRecordText).
 */
export function parseRecord(text: string): JsonValue {
  const { value, compact } = new Parser(text, true).document();
  if (value !== null && typeof value === "object") rememberRaw(value, compact);
  return value;
}

const rawTexts = new WeakMap<object, { raw: string; canonical?: string }>();

/** rememberRaw records that value was read from raw (compact) record text. */
export function rememberRaw(value: object, raw: string): void {
  rawTexts.set(value, { raw });
}

/**
 * rawRecordText returns the stored text of a record value read through
 * parseRecord or a handle's read, when the value still serializes as it did
 * when it was read (it was not changed since); otherwise undefined.
 */
export function rawRecordText(value: unknown): string | undefined {
  if (value === null || typeof value !== "object") return undefined;
  const r = rawTexts.get(value);
  if (!r) return undefined;
  r.canonical ??= stringifyJson(parseJson(r.raw));
  return stringifyJson(value as JsonValue) === r.canonical ? r.raw : undefined;
}

class Parser {
  private i = 0;
  private out: string[] | null;
  constructor(
    private readonly s: string,
    compact: boolean,
  ) {
    this.out = compact ? [] : null;
  }

  document(): { value: JsonValue; compact: string } {
    this.ws();
    const value = this.value(0);
    this.ws();
    if (this.i !== this.s.length) this.fail("unexpected text after the value");
    return { value, compact: this.out ? this.out.join("") : "" };
  }

  private fail(what: string): never {
    throw new JsonSyntaxError(`invalid JSON at offset ${this.i}: ${what}`);
  }

  private ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.i++;
    }
  }

  private emit(t: string): void {
    this.out?.push(t);
  }

  private value(depth: number): JsonValue {
    if (depth > MaxDepth) this.fail(`nesting deeper than ${MaxDepth}`);
    const c = this.s[this.i];
    switch (c) {
      case "{":
        return this.object(depth);
      case "[":
        return this.array(depth);
      case '"':
        return this.string();
      case "t":
        return this.literal("true", true);
      case "f":
        return this.literal("false", false);
      case "n":
        return this.literal("null", null);
      default:
        if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return this.number();
        this.fail(c === undefined ? "unexpected end" : `unexpected ${JSON.stringify(c)}`);
    }
  }

  private literal<T extends JsonValue>(lit: string, v: T): T {
    if (!this.s.startsWith(lit, this.i)) this.fail(`expected ${lit}`);
    this.i += lit.length;
    this.emit(lit);
    return v;
  }

  private object(depth: number): JsonValue {
    this.i++;
    this.emit("{");
    const obj: { [key: string]: JsonValue } = {};
    const seen = new Set<string>();
    this.ws();
    if (this.s[this.i] === "}") {
      this.i++;
      this.emit("}");
      return obj;
    }
    for (;;) {
      if (this.s[this.i] !== '"') this.fail("expected a key");
      const key = this.string();
      if (seen.has(key)) this.fail(`duplicate key ${JSON.stringify(key)}`);
      seen.add(key);
      this.ws();
      if (this.s[this.i] !== ":") this.fail("expected ':'");
      this.i++;
      this.emit(":");
      this.ws();
      const v = this.value(depth + 1);
      // "__proto__" is an own key like any other, never the prototype.
      Object.defineProperty(obj, key, { value: v, writable: true, enumerable: true, configurable: true });
      this.ws();
      const c = this.s[this.i];
      if (c === ",") {
        this.i++;
        this.emit(",");
        this.ws();
        continue;
      }
      if (c === "}") {
        this.i++;
        this.emit("}");
        return obj;
      }
      this.fail("expected ',' or '}'");
    }
  }

  private array(depth: number): JsonValue {
    this.i++;
    this.emit("[");
    const arr: JsonValue[] = [];
    this.ws();
    if (this.s[this.i] === "]") {
      this.i++;
      this.emit("]");
      return arr;
    }
    for (;;) {
      arr.push(this.value(depth + 1));
      this.ws();
      const c = this.s[this.i];
      if (c === ",") {
        this.i++;
        this.emit(",");
        this.ws();
        continue;
      }
      if (c === "]") {
        this.i++;
        this.emit("]");
        return arr;
      }
      this.fail("expected ',' or ']'");
    }
  }

  private string(): string {
    const s = this.s;
    const start = this.i;
    this.i++;
    let v = "";
    let run = this.i;
    for (;;) {
      if (this.i >= s.length) this.fail("unterminated string");
      const c = s.charCodeAt(this.i);
      if (c === 0x22) break;
      if (c < 0x20) this.fail("control character in a string");
      if (c === 0x5c) {
        v += s.slice(run, this.i);
        const e = s[this.i + 1];
        const simple: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
        if (e !== undefined && e in simple) {
          v += simple[e];
          this.i += 2;
        } else if (e === "u") {
          const hex = s.slice(this.i + 2, this.i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("bad \\u escape");
          v += String.fromCharCode(parseInt(hex, 16));
          this.i += 6;
        } else {
          this.fail("bad escape");
        }
        run = this.i;
        continue;
      }
      this.i++;
    }
    v += s.slice(run, this.i);
    this.i++;
    this.emit(s.slice(start, this.i));
    return v;
  }

  private number(): JsonValue {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(this.s.slice(this.i, this.i + 4096));
    if (!m) this.fail("bad number");
    const text = m[0];
    this.i += text.length;
    this.emit(text);
    const n = Number(text);
    if (Object.is(n, -0) || (n === 0 && text.startsWith("-"))) this.fail("-0 cannot round-trip");
    if (!Number.isFinite(n)) this.fail(`number ${text} is beyond a double`);
    return String(n) === text ? n : new JsonNumber(text);
  }
}

/**
 * stringifyJson writes value as JSON.stringify would, with JsonNumber as its
 * exact text. Anything that is not lossless JSON — undefined, a function, a
 * symbol, a BigInt, -0, NaN, ±Infinity, a cycle, a sparse array, an object
 * that is not a plain record (a Date, a Map, a class instance) — is a
 * TypeError naming where it is: "… is not losslessly JSON-serializable …".
 */
export function stringifyJson(value: unknown, what = "value"): string {
  const parts: string[] = [];
  const stack = new Set<object>();
  const bad = (path: string, why: string): never => {
    throw new TypeError(`${what} is not losslessly JSON-serializable: ${path} ${why}`);
  };
  const write = (v: unknown, path: string): void => {
    switch (typeof v) {
      case "string":
        parts.push(JSON.stringify(v));
        return;
      case "boolean":
        parts.push(v ? "true" : "false");
        return;
      case "number":
        if (!Number.isFinite(v)) bad(path, `is ${v}`);
        if (Object.is(v, -0)) bad(path, "is -0");
        parts.push(String(v));
        return;
      case "bigint":
        bad(path, "is a BigInt (write it as a JsonNumber)");
        return;
      case "undefined":
      case "function":
      case "symbol":
        bad(path, `is ${typeof v}`);
        return;
    }
    if (v === null) {
      parts.push("null");
      return;
    }
    const o = v as object;
    if (o instanceof JsonNumber) {
      parts.push(o.text);
      return;
    }
    if (stack.has(o)) bad(path, "is a cycle");
    stack.add(o);
    if (Array.isArray(o)) {
      parts.push("[");
      for (let i = 0; i < o.length; i++) {
        if (!(i in o)) bad(`${path}[${i}]`, "is a hole of a sparse array");
        if (i > 0) parts.push(",");
        write(o[i], `${path}[${i}]`);
      }
      parts.push("]");
    } else {
      const proto = Object.getPrototypeOf(o);
      if (proto !== Object.prototype && proto !== null) bad(path, `is a ${proto?.constructor?.name ?? "exotic object"}, not a plain object`);
      if (Object.getOwnPropertySymbols(o).length > 0) bad(path, "has symbol keys");
      parts.push("{");
      let first = true;
      for (const k of Object.keys(o)) {
        if (!first) parts.push(",");
        first = false;
        parts.push(JSON.stringify(k), ":");
        write((o as Record<string, unknown>)[k], `${path}.${k}`);
      }
      parts.push("}");
    }
    stack.delete(o);
  };
  write(value, what);
  return parts.join("");
}

/** cloneJson deep-copies a lossless JSON value (JsonNumbers are immutable and shared). */
export function cloneJson<T extends JsonValue>(v: T): T {
  if (v === null || typeof v !== "object" || v instanceof JsonNumber) return v;
  if (Array.isArray(v)) return v.map((x) => cloneJson(x)) as T;
  const out: { [key: string]: JsonValue } = {};
  for (const k of Object.keys(v)) {
    Object.defineProperty(out, k, { value: cloneJson((v as Record<string, JsonValue>)[k]!), writable: true, enumerable: true, configurable: true });
  }
  return out as T;
}

/** deepFreeze freezes a JSON value in place and returns it. */
export function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === "object" && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}
