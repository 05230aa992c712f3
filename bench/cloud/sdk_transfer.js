// One download or upload through a reference SDK, timed in-process, for bench/cloud/run_benchmarks.sh: npm
// @azure/storage-blob against Azurite, npm @google-cloud/storage against the GCS emulator (installed by
// `tests/support/emulators.sh clients`; run with NODE_PATH=<that node_modules>). The client is made, and a first
// request has opened a connection and checked the credentials, before the clock starts.
//
//   node sdk_transfer.js azure download|upload --container C --name N --file PATH [--mode M]
//       download modes: file      BlockBlobClient.downloadToFile(path) (the default: one GET, streamed to the file)
//                       buffer    downloadToBuffer({blockSize: 16 MiB, concurrency: 8}), then one write of the file
//                                 (the SDK's parallel download; it has none to a file)
//       upload modes:   default   BlockBlobClient.uploadFile(path) with no options (256 MiB or less: one Put Blob)
//                       blocks    uploadFile(path, {blockSize: 16 MiB, maxSingleShotSize: 16 MiB, concurrency: 8})
//     the account from $AZURE_STORAGE_CONNECTION_STRING (SharedKey)
//   node sdk_transfer.js gcs download|upload --bucket B --name N --file PATH [--mode M]
//       download modes: file      file.download({destination}) (the default: one GET; CRC32C validation, the
//                                 default, when the server sends the hash)
//                       chunks    TransferManager.downloadFileInChunks (its defaults: 32 MiB ranges, 5 at once)
//       upload modes:   default   bucket.upload(path, {destination}) (resumable, the default above 5 MiB: one
//                                 session, the file in one PUT)
//                       multipart bucket.upload(path, {destination, resumable: false}) (one uploadType=multipart)
//     no credentials: $STORAGE_EMULATOR_HOST (the client library honours it)
// Prints one JSON line like bench_cloud_transfer's: {"op", "sdk", "mode", "bytes", "seconds", "cpu_seconds",
// "mb_per_s"} (cpu: process.cpuUsage during the transfer, every thread).
"use strict";
const fs = require("fs");

const MiB = 1024 * 1024;

function parse(argv) {
  const options = { mode: undefined };
  for (let i = 0; i < argv.length; i += 2) options[argv[i].replace(/^--/, "")] = argv[i + 1];
  return options;
}

async function azure(op, o) {
  const { BlobServiceClient } = require("@azure/storage-blob");
  const text = process.env.AZURE_STORAGE_CONNECTION_STRING;
  if (!text) throw new Error("AZURE_STORAGE_CONNECTION_STRING is not set");
  const container = BlobServiceClient.fromConnectionString(text).getContainerClient(o.container);
  const blob = container.getBlockBlobClient(o.name);
  await container.getProperties();
  const mode = o.mode || (op === "download" ? "file" : "default");
  let run;
  if (op === "download" && mode === "file") run = () => blob.downloadToFile(o.file);
  else if (op === "download" && mode === "buffer")
    run = async () => {
      const bytes = await blob.downloadToBuffer(0, undefined, { blockSize: 16 * MiB, concurrency: 8 });
      await fs.promises.writeFile(o.file, bytes);
    };
  else if (op === "upload" && mode === "default") run = () => blob.uploadFile(o.file);
  else if (op === "upload" && mode === "blocks")
    run = () => blob.uploadFile(o.file, { blockSize: 16 * MiB, maxSingleShotSize: 16 * MiB, concurrency: 8 });
  else throw new Error("unknown azure mode " + op + " " + mode);
  return { mode, run };
}

async function gcs(op, o) {
  const { Storage, TransferManager } = require("@google-cloud/storage");
  if (!process.env.STORAGE_EMULATOR_HOST) throw new Error("STORAGE_EMULATOR_HOST is not set");
  const storage = new Storage({ projectId: process.env.GCS_EMULATOR_PROJECT || "demo-test" });
  const bucket = storage.bucket(o.bucket);
  await bucket.getFiles({ maxResults: 1 });  // the emulator makes a bucket on its first upload: no getMetadata
  const mode = o.mode || (op === "download" ? "file" : "default");
  let run;
  if (op === "download" && mode === "file") run = () => bucket.file(o.name).download({ destination: o.file });
  else if (op === "download" && mode === "chunks")
    run = () => new TransferManager(bucket).downloadFileInChunks(o.name, { destination: o.file, noReturnData: true });
  else if (op === "upload" && mode === "default") run = () => bucket.upload(o.file, { destination: o.name });
  else if (op === "upload" && mode === "multipart")
    run = () => bucket.upload(o.file, { destination: o.name, resumable: false });
  else throw new Error("unknown gcs mode " + op + " " + mode);
  return { mode, run };
}

async function main() {
  const [sdk, op, ...rest] = process.argv.slice(2);
  const o = parse(rest);
  const { mode, run } = await (sdk === "azure" ? azure : sdk === "gcs" ? gcs : () => Promise.reject(new Error("sdk?")))(
    op,
    o,
  );
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  await run();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const spent = process.cpuUsage(cpu);
  const bytes = fs.statSync(o.file).size;
  console.log(
    JSON.stringify({
      op,
      sdk,
      mode,
      bytes,
      seconds,
      cpu_seconds: (spent.user + spent.system) / 1e6,
      mb_per_s: bytes / 1e6 / seconds,
    }),
  );
}

main().catch((e) => {
  console.error("sdk_transfer: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
