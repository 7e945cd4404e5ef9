// @dshq/harness: dshq's harness SDK for TypeScript (docs/sdk.md#typescript-dshqharness).
export * from "./errors.js";
export { JsonNumber, type JsonValue, parseJson, parseRecord, stringifyJson, rawRecordText } from "./json.js";
export * from "./names.js";
export { type SessionHeader, type SessionEvent, SESSION_FORMAT_VERSION, knownEventTypes, encodeHeaderRecord } from "./records.js";
export * from "./persistence.js";
export * from "./query.js";
