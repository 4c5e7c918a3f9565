// Transport: the storage of a remote, seen as named immutable blobs plus small mutable refs that
// move only by compare-and-swap. Everything a remote holds (its config, packs of object records,
// their indexes, its branch heads) goes through this one interface, so push, fetch, clone and
// lazy reads are written once and run on every backend.
//
// Backends, one file each, the way kv::Kv has RocksKv, MemKv and FaultKv:
//   file_transport.cc   file:///PATH        a directory (a shared or second disk; fast tests)
//   rados_transport.cc  rados://POOL[/NS]   librados; CEPH_CONF and its keyring as `rados` finds them
//   s3_transport.cc     s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT   libcurl with AWS SigV4
//   fault_transport.h   wraps another; cuts a push or a read in half, damages bytes (tests)
//
// Keys are '/'-separated ASCII paths ([A-Za-z0-9._/-], no "..", no leading '/'), at most 512
// bytes; each backend maps them onto its own names (a file path under the root, a RADOS object
// in the pool's namespace, an S3 key under the prefix). A backend never lets a key name anything
// outside its root.
//
// Blobs are written whole and atomically (a reader sees the old blob, the new one or none, never
// part of one) and are never modified in place by LayerFS; Put of an existing key replaces it.
// Every backend takes blobs up to kMaxPortableBlob; a larger one may fail with EFBIG (RADOS: one
// write, at most osd_max_write_size, 90 MiB by default), so packs are kept below that.
// Refs are small values carrying a version token: CasRef sets a ref only if its token is still
// the one the caller read (RADOS: object version; S3: ETag with If-Match / If-None-Match: *;
// file: a version counter under a lock), so two writers racing on one ref see exactly one win.
//
// Errors (errno-style Status, one line naming the remote and key):
//   ENOENT  the key is absent            EEXIST  PutIfAbsent found the key
//   ESTALE  CasRef's expected token is no longer current
//   EACCES  refused by the backend (credentials, permissions)
//   EIO     damaged or unexpected answer; ETIMEDOUT / ECONNREFUSED / EHOSTUNREACH network faults
// Every call gives up after the transport's timeout (LAYERFS_REMOTE_TIMEOUT seconds, default 30)
// instead of hanging: a read through a mount must fail with EIO, not wait forever.
//
// Thread-safety: every method may be called from several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layerfs/status.h"

namespace layerfs::remote {

inline constexpr uint64_t kMaxPortableBlob = 64ull << 20;

struct RefValue {
  std::string value;
  std::string token;  // opaque version token for CasRef
};

// One ranged read of ReadRanges: in `key`, `offset`, `length`; out `data` (exactly `length`
// bytes, or fewer only at the end of the blob) and `status`.
struct RangeRead {
  std::string key;
  uint64_t offset = 0, length = 0;
  std::string data;
  Status status;
};

// Parsed remote URL. kind is "file", "rados" or "s3".
struct RemoteUrl {
  std::string kind;
  std::string location;  // file: absolute directory; rados: pool; s3: bucket
  std::string prefix;    // rados: namespace; s3: key prefix (no leading or trailing '/')
  std::string endpoint;  // s3 only: http(s)://HOST:PORT, empty for AWS
  std::string region;    // s3 only: ?region=, empty for AWS_REGION / the AWS config / us-east-1
  std::string text;      // the URL as given
  static Result<RemoteUrl> Parse(std::string_view url);
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Whole blobs.
  virtual Status Put(std::string_view key, std::string_view data) = 0;
  // Stores `data` only if `key` is absent: EEXIST otherwise (RADOS exclusive create, S3
  // If-None-Match: *).
  virtual Status PutIfAbsent(std::string_view key, std::string_view data) = 0;
  virtual Result<std::string> Get(std::string_view key) = 0;
  // Size of a blob; ENOENT if absent.
  virtual Result<uint64_t> Size(std::string_view key) = 0;
  // Runs every read (concurrently where the backend can) and fills each one's data and status;
  // returns the first failure, or Ok when all succeeded.
  virtual Status ReadRanges(std::vector<RangeRead>* reads) = 0;
  // Keys that start with `prefix`, sorted.
  virtual Result<std::vector<std::string>> List(std::string_view prefix) = 0;
  // Deleting an absent key is not an error.
  virtual Status Delete(std::string_view key) = 0;

  // Refs. GetRef: nullopt when absent.
  virtual Result<std::optional<RefValue>> GetRef(std::string_view key) = 0;
  // Sets the ref to `value` if its token is still `expected` (nullopt: the ref must be absent);
  // ESTALE otherwise. Returns the new token.
  virtual Result<std::string> CasRef(std::string_view key, std::string_view value,
                                     const std::optional<std::string>& expected) = 0;

  // The URL this transport serves, for messages.
  virtual const std::string& url() const = 0;
};

// Opens the backend a URL names. Does not contact the remote beyond what the backend needs to
// connect (RADOS: the cluster handle and pool; S3: nothing until the first request). A file://
// directory that is not there is made, unless `existing` (clone: a missing directory is a
// mistyped path, ENOENT); RADOS pools must exist, and an absent S3 bucket is an empty remote.
Result<std::unique_ptr<Transport>> OpenTransport(std::string_view url, bool existing = false);

// Checks a key against the rules above (EINVAL with the key named otherwise).
Status CheckKey(std::string_view key);

}  // namespace layerfs::remote
