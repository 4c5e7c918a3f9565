// The S3 backend before it is built: opening such a remote fails loudly.
#include "remote/backends.h"

namespace layerfs::remote {

Result<std::unique_ptr<Transport>> OpenS3Transport(const RemoteUrl& url) {
  return Status::Errorf(ENOTSUP, "remote {}: s3 remotes are not supported by this build yet", url.text);
}

}  // namespace layerfs::remote
