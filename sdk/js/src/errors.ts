// Errors of the LayerFS SDK: one class per stable error code of docs/protocol.md.
//
// Every failure of a verb arrives as {code, errno, message}; the SDK rejects with the class
// registered for `code` (LayerFSError itself for a code it does not know), so callers can test
// `err instanceof NotFound` or `err.code === "ENOENT"`. `message` is "layerfs: " plus the one line
// the CLI prints; `detail` is that line alone.

import { constants } from "node:os";

/** Base of every error a verb reports. */
export class LayerFSError extends Error {
  /** The stable code: "ENOENT", "EBUSY", "NOT_FAST_FORWARD", ... */
  readonly code: string;
  /** The POSIX errno number where there is one, 0 otherwise. */
  readonly errno: number;
  /** The one-line message, without the "layerfs: " prefix. */
  readonly detail: string;
  /** A result some errors carry (CONFLICT lists the conflicts). */
  readonly result: unknown;

  constructor(code: string, errno: number, detail: string, result?: unknown) {
    super(`layerfs: ${detail}`);
    this.name = new.target.name;
    this.code = code;
    this.errno = errno;
    this.detail = detail;
    this.result = result;
  }
}

/** ENOENT: no such branch, commit, path, remote or mount. */
export class NotFound extends LayerFSError {}
/** EEXIST: the branch, remote or directory already exists. */
export class Exists extends LayerFSError {}
/** EBUSY: in use (the branch is mounted, the Store is held by another process). */
export class Busy extends LayerFSError {}
/** EINVAL: a bad argument (name, policy, REF syntax, unknown argument, wrong type). */
export class InvalidArgument extends LayerFSError {}
/** ENOTDIR: a path is not a directory. */
export class NotADirectory extends LayerFSError {}
/** EISDIR: a path is a directory. */
export class IsADirectory extends LayerFSError {}
/** EROFS: a read-only mount or view. */
export class ReadOnly extends LayerFSError {}
/** ENOSPC: the Store's disk is full. */
export class NoSpace extends LayerFSError {}
/** EIO: damaged data (a hash mismatch, a damaged table) or an I/O error. */
export class IOFailure extends LayerFSError {}
/** EACCES: not the Store's owner, or refused by a remote. */
export class PermissionDenied extends LayerFSError {}
/** ENOTCONN: the verb needs the daemon and was run without one. */
export class NotConnected extends LayerFSError {}
/** ECONNRESET: the daemon closed the connection before it answered (the verb may have run). */
export class ConnectionLost extends LayerFSError {}
/** ESTALE: a remote ref moved underneath (compare-and-swap lost). */
export class Stale extends LayerFSError {}
/** ETIMEDOUT, ECONNREFUSED, EHOSTUNREACH: a remote could not be reached. */
export class Unreachable extends LayerFSError {}
/** NOT_FAST_FORWARD: a push or pull that is not a fast-forward. */
export class NotFastForward extends LayerFSError {}
/** CONFLICT: a merge stopped on conflicts (`result` lists them when the daemon sent it). */
export class Conflict extends LayerFSError {}
/** DIVERGED: a remote's history or id key does not match this Store's. */
export class Diverged extends LayerFSError {}
/** PROTOCOL: a version mismatch, or a message that is not a valid request or response. */
export class ProtocolError extends LayerFSError {}
/** TOO_LARGE: a message over the protocol's size limit. */
export class TooLarge extends LayerFSError {}

type ErrorClass = new (code: string, errno: number, detail: string, result?: unknown) => LayerFSError;

const BY_CODE: Record<string, ErrorClass> = {
  ENOENT: NotFound,
  EEXIST: Exists,
  EBUSY: Busy,
  EINVAL: InvalidArgument,
  ENOTDIR: NotADirectory,
  EISDIR: IsADirectory,
  EROFS: ReadOnly,
  ENOSPC: NoSpace,
  EIO: IOFailure,
  EACCES: PermissionDenied,
  EPERM: PermissionDenied,
  ENOTCONN: NotConnected,
  ECONNRESET: ConnectionLost,
  ESTALE: Stale,
  ETIMEDOUT: Unreachable,
  ECONNREFUSED: Unreachable,
  EHOSTUNREACH: Unreachable,
  NOT_FAST_FORWARD: NotFastForward,
  CONFLICT: Conflict,
  DIVERGED: Diverged,
  PROTOCOL: ProtocolError,
  TOO_LARGE: TooLarge,
};

/** The class used for `code` (LayerFSError for a code without its own class). */
export function errorClass(code: string): ErrorClass {
  return BY_CODE[code] ?? LayerFSError;
}

/** An error of the class for `code`; `errno` defaults to the POSIX number of the name. */
export function makeError(code: string, detail: string, errno?: number, result?: unknown): LayerFSError {
  const num = errno ?? ((constants.errno as Record<string, number>)[code] ?? 0);
  const Cls = errorClass(code);
  return new Cls(code, num, detail, result);
}

/** The error for a response's `error` object; a malformed one is a ProtocolError. */
export function fromWire(error: unknown): LayerFSError {
  if (typeof error !== "object" || error === null || typeof (error as { code?: unknown }).code !== "string") {
    return new ProtocolError("PROTOCOL", 0, `malformed error from layerfsd: ${JSON.stringify(error)}`);
  }
  const e = error as { code: string; errno?: unknown; message?: unknown; result?: unknown };
  return makeError(
    e.code,
    typeof e.message === "string" ? e.message : e.code,
    typeof e.errno === "number" ? e.errno : undefined,
    e.result,
  );
}
