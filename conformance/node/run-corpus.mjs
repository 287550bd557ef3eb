// The JavaScript reference run of the erasure conformance corpus.
//
// What a TypeScript store built on @linn-cloud/domain-erasure most plausibly does with a body:
// JSON.parse, then the shared schema under ajv 8's 2020-12 build in strict mode with ajv-formats,
// then the request/answer split on `type`. It prints one JSON document on stdout:
//   {"runner": ..., "verdicts": [{"name", "bodyEncoding", "verdict", "messageType"?}, ...]}
// and exits 0; it exits 2 (with the reason on stderr) when the schema does not compile.
//
//   node run-corpus.mjs [corpus.json] [schema.json]
//
// The defaults are the repository's schema/erasure-conformance-corpus.json and
// schema/erasure-contract.schema.json. A corpus given on the command line needs only `entries`
// (each with name, bodyEncoding and body), so a test can run vectors of its own.
//
// Base64 bodies are bytes, which cannot reach a Node store as such (SQS replaces or refuses what is
// not valid UTF-8): `verdict` reads them with a fatal UTF-8 decoder that keeps a byte order mark (the
// corpus's own reading, marked `bytesReading: true`), and `lossyVerdict` as Buffer#toString does
// (each bad sequence becomes U+FFFD), to show what a Node reading of those bytes would give.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const here = dirname(fileURLToPath(import.meta.url));
const repository = join(here, "..", "..");
const corpusPath = process.argv[2] ?? join(repository, "schema", "erasure-conformance-corpus.json");
const schemaPath = process.argv[3] ?? join(repository, "schema", "erasure-contract.schema.json");

const REQUEST_TYPES = new Set(["erasure/ERASE", "erasure/REFILE", "erasure/CLASSIFY", "erasure/CHECK"]);

function compile(schema) {
  const ajv = new Ajv2020({ strict: true, allErrors: false });
  addFormats(ajv);
  return ajv.compile(schema);
}

function text(entry, lossy) {
  if (entry.bodyEncoding === "text") {
    return entry.body;
  }
  if (entry.bodyEncoding === "base64") {
    const bytes = Buffer.from(entry.body, "base64");
    if (lossy) {
      return bytes.toString("utf8");
    }
    try {
      return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      return undefined;
    }
  }
  throw new Error(`unknown bodyEncoding in entry ${entry.name}`);
}

function verdict(validate, entry, lossy = false) {
  const body = text(entry, lossy);
  if (body === undefined) {
    return { verdict: "NOT_JSON" };
  }
  let value;
  try {
    value = JSON.parse(body);
  } catch {
    return { verdict: "NOT_JSON" };
  }
  if (!validate(value)) {
    return { verdict: "INVALID_MESSAGE" };
  }
  // Valid against the whole contract: a request, or an answer where a request was expected.
  if (REQUEST_TYPES.has(value.type)) {
    return { verdict: "accepted", messageType: value.type };
  }
  return { verdict: "NOT_A_REQUEST", messageType: value.type };
}

function main() {
  const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
  const corpus = JSON.parse(readFileSync(corpusPath, "utf8"));
  let validate;
  try {
    validate = compile(schema);
  } catch (error) {
    process.stderr.write(`the schema does not compile under ajv strict mode: ${error.message}\n`);
    process.exit(2);
  }
  const require = createRequire(import.meta.url);
  const verdicts = corpus.entries.map((entry) => {
    const result = {
      name: entry.name,
      bodyEncoding: entry.bodyEncoding,
      bytesReading: entry.bodyEncoding !== "text",
      ...verdict(validate, entry),
    };
    if (result.bytesReading) {
      result.lossyVerdict = verdict(validate, entry, true).verdict;
    }
    return result;
  });
  const report = {
    runner: {
      node: process.version,
      ajv: require("ajv/package.json").version,
      ajvFormats: require("ajv-formats/package.json").version,
      options: { strict: true, formats: "ajv-formats (all)" },
    },
    verdicts,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main();
