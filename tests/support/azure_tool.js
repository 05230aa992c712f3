// The reference Azure Blob client of the e2e suites and benchmarks: npm @azure/storage-blob (installed by
// `tests/support/emulators.sh clients`; run with NODE_PATH=<that node_modules>), against Azurite.
//
//   node azure_tool.js COMMAND ARGS...      (the account from $AZURE_STORAGE_CONNECTION_STRING)
//     create CONTAINER                      create a container (no error when it exists)
//     sas CONTAINER [--expired] [--perms racwdl] [--account]
//                                           print a SAS token: a container (service) SAS made with the account key,
//                                           or an account SAS; --expired: one that ran out an hour ago
//     put CONTAINER NAME FILE [--block-size N] [--meta k=v]...
//                                           upload FILE: one Put Blob, or with --block-size N, Put Block of N bytes
//                                           each (in parallel) and Put Block List
//     get CONTAINER NAME FILE [--concurrency N] [--block-size N]
//                                           download to FILE (ranges of N bytes, N at once when given); prints the
//                                           properties as JSON
//     head CONTAINER NAME                   print {"size", "etag", "metadata", "contentMD5"} as JSON (exit 3: no blob)
//     list CONTAINER [PREFIX] [--uncommitted]
//                                           print the blob names, one a line; --uncommitted: also the blobs that
//                                           have only uncommitted blocks (List Blobs include=uncommittedblobs)
//     blocks CONTAINER NAME                 print {"committed": N, "uncommitted": N, "uncommitted_bytes": N} of
//                                           a blob's block list (Get Block List, blocklisttype=all; exit 3: none)
//     delete CONTAINER NAME                 delete a blob (exit 3 when there is none)
//     corrupt CONTAINER NAME                rewrite a blob with one byte changed, its metadata kept
// Timing (for the benchmarks): put and get print {"seconds", "cpu_seconds", "bytes"} of the transfer itself on
// stderr, measured in this process (process.cpuUsage: every thread).
"use strict";
const fs = require("fs");
const {
  BlobServiceClient,
  StorageSharedKeyCredential,
  generateBlobSASQueryParameters,
  generateAccountSASQueryParameters,
  ContainerSASPermissions,
  AccountSASPermissions,
  AccountSASServices,
  AccountSASResourceTypes,
} = require("@azure/storage-blob");

function fail(message, code = 1) {
  console.error("azure_tool: " + message);
  process.exit(code);
}

function parse(argv) {
  const positional = [];
  const options = { meta: {} };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === "--expired" || a === "--account" || a === "--uncommitted") options[a.slice(2)] = true;
    else if (a === "--meta") {
      const [k, v] = argv[++i].split("=");
      options.meta[k] = v;
    } else if (a.startsWith("--")) options[a.slice(2).replace(/-/g, "_")] = argv[++i];
    else positional.push(a);
  }
  return { positional, options };
}

function connection() {
  const text = process.env.AZURE_STORAGE_CONNECTION_STRING || fail("AZURE_STORAGE_CONNECTION_STRING is not set");
  const fields = {};
  for (const part of text.split(";")) {
    const at = part.indexOf("=");
    if (at > 0) fields[part.slice(0, at)] = part.slice(at + 1);
  }
  return { text, account: fields.AccountName, key: fields.AccountKey, endpoint: fields.BlobEndpoint };
}

function timed(started, cpu, bytes) {
  const spent = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  console.error(JSON.stringify({ seconds, cpu_seconds: (spent.user + spent.system) / 1e6, bytes }));
}

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  const { positional, options } = parse(rest);
  const c = connection();
  const service = BlobServiceClient.fromConnectionString(c.text);
  const container = positional[0] && service.getContainerClient(positional[0]);
  const blob = positional[1] && container.getBlockBlobClient(positional[1]);
  switch (command) {
    case "create":
      await container.createIfNotExists();
      return;
    case "sas": {
      const credential = new StorageSharedKeyCredential(c.account, c.key);
      const now = Date.now();
      const startsOn = new Date(now - (options.expired ? 2 : 1) * 3600e3);
      const expiresOn = new Date(options.expired ? now - 3600e3 : now + 3600e3);
      const perms = options.perms || "racwdl";
      const sas = options.account
        ? generateAccountSASQueryParameters(
            {
              permissions: AccountSASPermissions.parse(perms),
              services: AccountSASServices.parse("b").toString(),
              resourceTypes: AccountSASResourceTypes.parse("sco").toString(),
              startsOn,
              expiresOn,
            },
            credential,
          )
        : generateBlobSASQueryParameters(
            { containerName: positional[0], permissions: ContainerSASPermissions.parse(perms), startsOn, expiresOn },
            credential,
          );
      console.log(sas.toString());
      return;
    }
    case "put": {
      const size = fs.statSync(positional[2]).size;
      const blockSize = options.block_size ? parseInt(options.block_size, 10) : undefined;
      const started = process.hrtime.bigint();
      const cpu = process.cpuUsage();
      await blob.uploadFile(positional[2], {
        blockSize: blockSize || 4 * 1024 * 1024,
        // A single Put Blob up to this size; with --block-size, blocks for anything larger than one block.
        maxSingleShotSize: blockSize ? blockSize : 256 * 1024 * 1024,
        concurrency: options.concurrency ? parseInt(options.concurrency, 10) : 5,
        metadata: options.meta,
      });
      timed(started, cpu, size);
      return;
    }
    case "get": {
      const started = process.hrtime.bigint();
      const cpu = process.cpuUsage();
      const properties = await blob.getProperties().catch((e) => {
        if (e.statusCode === 404) fail("no such blob", 3);
        throw e;
      });
      await blob.downloadToFile(positional[2], 0, undefined, {
        blockSize: options.block_size ? parseInt(options.block_size, 10) : undefined,
        concurrency: options.concurrency ? parseInt(options.concurrency, 10) : undefined,
      });
      timed(started, cpu, properties.contentLength);
      console.log(JSON.stringify({ size: properties.contentLength, metadata: properties.metadata }));
      return;
    }
    case "head": {
      const p = await blob.getProperties().catch((e) => {
        if (e.statusCode === 404) fail("no such blob", 3);
        throw e;
      });
      console.log(
        JSON.stringify({
          size: p.contentLength,
          etag: p.etag,
          metadata: p.metadata,
          contentMD5: p.contentMD5 ? Buffer.from(p.contentMD5).toString("base64") : null,
        }),
      );
      return;
    }
    case "list": {
      // (sic: the SDK spells the option includeUncommitedBlobs)
      const listing = { prefix: positional[1] || undefined, includeUncommitedBlobs: !!options.uncommitted };
      for await (const item of container.listBlobsFlat(listing)) console.log(item.name);
      return;
    }
    case "blocks": {
      const list = await blob.getBlockList("all").catch((e) => {
        if (e.statusCode === 404) fail("no such blob", 3);
        throw e;
      });
      const uncommitted = list.uncommittedBlocks || [];
      console.log(
        JSON.stringify({
          committed: (list.committedBlocks || []).length,
          uncommitted: uncommitted.length,
          uncommitted_bytes: uncommitted.reduce((sum, b) => sum + b.size, 0),
        }),
      );
      return;
    }
    case "delete": {
      const done = await blob.deleteIfExists();
      if (!done.succeeded) fail("no such blob", 3);
      return;
    }
    case "corrupt": {
      const p = await blob.getProperties();
      const bytes = await blob.downloadToBuffer();
      bytes[Math.floor(bytes.length / 2)] ^= 0x01;
      await blob.uploadData(bytes, { metadata: p.metadata });
      return;
    }
    default:
      fail("usage: node azure_tool.js create|sas|put|get|head|list|blocks|delete|corrupt ...", 2);
  }
}

main().catch((e) => fail((e && (e.code || e.statusCode)) + ": " + (e && e.message ? e.message.split("\n")[0] : e)));
