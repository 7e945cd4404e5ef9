// Lossless JSON and the wire's names, without a server.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { JsonNumber, parseJson, parseRecord, rawRecordText, stringifyJson } from "../src/json.js";
import { leaseKey, parseSubjectToken, sessionIdProblem, subjectToken } from "../src/names.js";
import { encodeHeaderRecord, parseHeaderRecord } from "../src/records.js";

describe("lossless JSON", () => {
  it("keeps a number a double cannot hold, or whose spelling JavaScript would change, as its exact text", () => {
    for (const text of ["12345678901234567890", "9007199254740993", "1.50", "1E5", "1e5", "0.10", "-1.0"]) {
      const v = parseJson(`{"n":${text}}`) as { n: JsonNumber };
      assert.ok(v.n instanceof JsonNumber, text);
      assert.equal(stringifyJson(v), `{"n":${text}}`);
    }
  });

  it("reads numbers JavaScript writes the same way as numbers", () => {
    assert.deepEqual(parseJson("[0,1,-2,1.5,1e+21,0.1,9007199254740991]"), [0, 1, -2, 1.5, 1e21, 0.1, 9007199254740991]);
  });

  it("refuses what cannot round-trip: -0, duplicate keys, numbers beyond a double, trailing text, deep nesting", () => {
    for (const bad of ['{"n":-0}', '{"n":-0.0}', '{"a":1,"a":2}', '{"n":1e400}', "{} x", "[".repeat(600) + "]".repeat(600), '{"a":01}', "'x'"]) {
      assert.throws(() => parseJson(bad), SyntaxError, bad.slice(0, 30));
    }
  });

  it("keeps __proto__ as an own key", () => {
    const v = parseJson('{"__proto__":{"polluted":true}}') as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.deepEqual(Object.keys(v), ["__proto__"]);
    assert.equal(stringifyJson(v), '{"__proto__":{"polluted":true}}');
  });

  it("writes what JSON.stringify writes for lossless values", () => {
    const v = { s: "é\u2028<>&\"\\\n\u0001\ud800", a: [1, "x", null, true, { b: [] }], n: 1e21 };
    assert.equal(stringifyJson(v), JSON.stringify(v));
  });

  it("refuses values that are not lossless JSON with a TypeError naming where", () => {
    assert.throws(() => stringifyJson({ a: { b: [1, undefined] } }), /value\.a\.b\[1\] is undefined/);
    assert.throws(() => stringifyJson({ d: new Date(0) }), /value\.d is a Date, not a plain object/);
    assert.throws(() => stringifyJson({ m: new Map() }), /value\.m is a Map/);
    assert.throws(() => stringifyJson({ b: 1n }), /BigInt/);
  });

  it("gives back a record's stored text while its value is unchanged, and not after a change", () => {
    const text = '{"type":"x","seq":0,"time":1,"data":{"2":"b","1":"a","e":"\\u00e9"}}';
    const v = parseRecord(text) as { data: Record<string, string> };
    assert.equal(rawRecordText(v), text);
    v.data.e = "changed";
    assert.equal(rawRecordText(v), undefined);
  });

  it("compacts a record's insignificant whitespace but keeps its tokens", () => {
    const v = parseRecord('{ "a" : 1.0 ,\n "b": [ "x\\/y" ] }');
    assert.equal(rawRecordText(v), '{"a":1.0,"b":["x\\/y"]}');
  });
});

describe("names", () => {
  it("session ids: 1 to 512 bytes of valid UTF-8 without control characters", () => {
    assert.equal(sessionIdProblem("s-1"), "");
    assert.match(sessionIdProblem(""), /empty/);
    assert.match(sessionIdProblem("é".repeat(257)), /514 bytes/);
    assert.match(sessionIdProblem("a\u0085"), /control character U\+0085/);
    assert.match(sessionIdProblem("\ud800"), /not valid UTF-8/);
  });

  it("subject tokens: the id when plain, else ~ and unpadded base64url; the inverse refuses non-canonical tokens", () => {
    assert.equal(subjectToken("s-7f3c_X"), "s-7f3c_X");
    assert.equal(subjectToken("a.b"), "~YS5i");
    assert.equal(subjectToken("x".repeat(201)).startsWith("~"), true);
    for (const id of ["a.b", "ü", ">", "x".repeat(201), "s-1"]) assert.equal(parseSubjectToken(subjectToken(id)), id);
    assert.equal(parseSubjectToken("~czEx"), undefined, "an encoded plain id");
    assert.equal(parseSubjectToken("a.b"), undefined);
  });

  it("lease keys: the token with its leading ~ written =, under the tenant", () => {
    assert.equal(leaseKey("", "~YS5i"), "=YS5i");
    assert.equal(leaseKey("teamA", "s-1"), "teamA.s-1");
  });
});

describe("header records", () => {
  it("are written in the Go SDK's field order and read back as the same header", () => {
    const h = { version: 2 as const, id: "s-1", createdAt: 5, cwd: "/w", parentSession: "p", isSeeded: true, origin: "subagent" as const, delegationDepth: 1, agentPreset: "a" };
    const text = encodeHeaderRecord(h, 3);
    assert.equal(text, '{"type":"session","version":2,"id":"s-1","createdAt":5,"cwd":"/w","parentSession":"p","isSeeded":true,"origin":"subagent","delegationDepth":1,"agentPreset":"a","inheritedEventCount":3}');
    assert.deepEqual(parseHeaderRecord(text), { header: h, inheritedEventCount: 3, formatVersion: 2 });
  });

  it("read a version 0 header as version 2: isSeeded from seedLength", () => {
    const r = parseHeaderRecord('{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","seedLength":4,"delegationDepth":0}');
    assert.deepEqual(r.header, { version: 2, id: "s", createdAt: 1, cwd: "/w", isSeeded: true, delegationDepth: 0 });
    assert.equal(r.inheritedEventCount, 4);
  });
});
