// The reference GCS client of the e2e suites and benchmarks: npm @google-cloud/storage (installed by
// `tests/support/emulators.sh clients`; run with NODE_PATH=<that node_modules>), against the firebase-tools
// Storage emulator at $STORAGE_EMULATOR_HOST (which the client library itself honours: no credentials).
//
//   node gcs_tool.js COMMAND ARGS...
//     put BUCKET NAME FILE [--resumable] [--chunk-size N] [--meta k=v]...
//                                    upload FILE: one multipart upload, or a resumable one (--resumable; in chunks
//                                    of N bytes with --chunk-size, which the emulator cannot do)
//     get BUCKET NAME FILE           download to FILE (validation of the MD5 on); prints the metadata as JSON
//     head BUCKET NAME               print {"size", "generation", "md5Hash", "metadata"} as JSON (exit 3: no object)
//     list BUCKET [PREFIX] [--long]  print the object names, one a line (--long: "name generation size")
//     delete BUCKET NAME             delete an object (exit 3 when there is none)
//     corrupt BUCKET NAME            rewrite an object with one byte changed, its metadata kept
// Timing (for the benchmarks): put and get print {"seconds", "cpu_seconds", "bytes"} of the transfer itself on
// stderr, measured in this process (process.cpuUsage).
"use strict";
const fs = require("fs");
const { Storage } = require("@google-cloud/storage");

function fail(message, code = 1) {
  console.error("gcs_tool: " + message);
  process.exit(code);
}

function parse(argv) {
  const positional = [];
  const options = { meta: {} };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === "--resumable" || a === "--long") options[a.slice(2)] = true;
    else if (a === "--meta") {
      const [k, v] = argv[++i].split("=");
      options.meta[k] = v;
    } else if (a.startsWith("--")) options[a.slice(2).replace(/-/g, "_")] = argv[++i];
    else positional.push(a);
  }
  return { positional, options };
}

function timed(started, cpu, bytes) {
  const spent = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  console.error(JSON.stringify({ seconds, cpu_seconds: (spent.user + spent.system) / 1e6, bytes }));
}

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  const { positional, options } = parse(rest);
  if (!process.env.STORAGE_EMULATOR_HOST) fail("STORAGE_EMULATOR_HOST is not set");
  const storage = new Storage({ projectId: process.env.GCS_EMULATOR_PROJECT || "demo-test" });
  const bucket = positional[0] && storage.bucket(positional[0]);
  const file = positional[1] && bucket.file(positional[1]);
  const missing = (e) => {
    if (e.code === 404) fail("no such object", 3);
    throw e;
  };
  switch (command) {
    case "put": {
      const size = fs.statSync(positional[2]).size;
      const started = process.hrtime.bigint();
      const cpu = process.cpuUsage();
      await bucket.upload(positional[2], {
        destination: positional[1],
        resumable: !!options.resumable,
        chunkSize: options.chunk_size ? parseInt(options.chunk_size, 10) : undefined,
        metadata: { contentType: "application/octet-stream", metadata: options.meta },
      });
      timed(started, cpu, size);
      return;
    }
    case "get": {
      const started = process.hrtime.bigint();
      const cpu = process.cpuUsage();
      const [metadata] = await file.getMetadata().catch(missing);
      await file.download({ destination: positional[2], validation: "md5" });
      timed(started, cpu, Number(metadata.size));
      console.log(JSON.stringify({ size: Number(metadata.size), metadata: metadata.metadata || {} }));
      return;
    }
    case "head": {
      const [m] = await file.getMetadata().catch(missing);
      console.log(
        JSON.stringify({ size: Number(m.size), generation: m.generation, md5Hash: m.md5Hash, metadata: m.metadata || {} }),
      );
      return;
    }
    case "list": {
      const [files] = await bucket.getFiles({ prefix: positional[1] || undefined });
      for (const f of files)
        console.log(options.long ? `${f.name} ${f.metadata.generation} ${f.metadata.size}` : f.name);
      return;
    }
    case "delete":
      await file.delete().catch(missing);
      return;
    case "corrupt": {
      const [m] = await file.getMetadata();
      const [bytes] = await file.download();
      bytes[Math.floor(bytes.length / 2)] ^= 0x01;
      await file.save(bytes, { resumable: false, metadata: { contentType: m.contentType, metadata: m.metadata } });
      return;
    }
    default:
      fail("usage: node gcs_tool.js put|get|head|list|delete|corrupt ...", 2);
  }
}

main().catch((e) => fail((e && e.code) + ": " + (e && e.message ? e.message.split("\n")[0] : e)));
