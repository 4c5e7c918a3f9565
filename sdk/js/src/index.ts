// LayerFS SDK for Node.js: drive a LayerFS Store from code, as an agent's shell would.
//
//   import { Store } from "layerfs";
//   const store = await Store.open("/data/store");   // starts layerfsd when none runs
//   await store.fork("try", "main");
//   await store.mount("try", "/tmp/try");
//   const id = await store.commit("/tmp/try", "an attempt");
//
// The wire protocol is docs/protocol.md, version 1. Failures reject with a LayerFSError subclass
// per error code, with `.code` and `.errno`.

export { Store, CHUNK } from "./store.js";
export type { OpenOptions, InitOptions, CallOptions, ExecOptions, MountOptions, MergeOptions, PickOptions,
  MergeStepOptions } from "./store.js";
export { PROTOCOL_VERSION, MAX_MESSAGE } from "./connection.js";
export * from "./errors.js";
export { nameToBytes, nameFromBytes } from "./names.js";
export type * from "./types.js";
