// The backends behind OpenTransport, and what they share. Private to src/remote; everything
// above the transports names a remote by URL and goes through OpenTransport.
#pragma once

#include <memory>
#include <string>

#include "remote/transport.h"

namespace layerfs::remote {

// file:///PATH: one file per blob under PATH (see file_transport.cc for the layout); a missing
// PATH is made unless `existing`.
Result<std::unique_ptr<Transport>> OpenFileTransport(const RemoteUrl& url, bool existing);
// rados://POOL[/NAMESPACE] through librados.
Result<std::unique_ptr<Transport>> OpenRadosTransport(const RemoteUrl& url);
// s3://BUCKET[/PREFIX]?endpoint=... through libcurl.
Result<std::unique_ptr<Transport>> OpenS3Transport(const RemoteUrl& url);

// LAYERFS_REMOTE_TIMEOUT in seconds (default 30, at least 1): how long one call may wait on
// the network before it fails with ETIMEDOUT (or EIO where the backend cannot tell).
int RemoteTimeoutSeconds();

// Checks a List prefix: like a key, but it may be empty and may end with '/' (or in the
// middle of a component).
Status CheckPrefix(std::string_view prefix);

}  // namespace layerfs::remote
