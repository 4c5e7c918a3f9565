// Fuzz target: what an S3 server (radosgw, AWS, or anything at the other end of the URL)
// answers, as S3Client and S3Transport read it (src/remote/s3_client.h): response header lines
// (status lines, ETag, Content-Length), a ListObjectsV2 page, and an error body made into the
// one-line Status a user reads. The input: a byte choosing the HTTP status, header lines up to
// an empty line, then the body. What RADOS answers is object bytes (packs, indexes, refs, the
// config), which the pack, pack_index, remote_config and fetch targets feed to their readers.
#include "fuzz_util.h"
#include "remote/s3_client.h"

using namespace layerfs;

namespace {

bool Printable(std::string_view s) {
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const long kStatus[] = {200, 206, 304, 400, 403, 404, 409, 412, 500, 503, 301, 0};
  std::string_view in = fuzz::AsView(data + 1, size - 1);
  size_t split = in.find("\n\n");
  std::string_view head = split == std::string_view::npos ? in : in.substr(0, split);
  std::string_view body = split == std::string_view::npos ? std::string_view() : in.substr(split + 2);

  std::string out;
  remote::HttpCall c;
  c.out = &out;
  c.status = kStatus[data[0] % (sizeof kStatus / sizeof kStatus[0])];
  c.curl_code = c.status == 0 ? 56 : 0;  // CURLE_RECV_ERROR
  while (!head.empty()) {
    size_t nl = head.find('\n');
    std::string line(head.substr(0, nl));
    line += "\r\n";
    c.OnHeaderLine(line);
    head = nl == std::string_view::npos ? std::string_view() : head.substr(nl + 1);
  }
  // An ETag goes back to the server in If-Match: one printable token, never a header break.
  FUZZ_CHECK(Printable(c.etag) && c.etag.find(' ') == std::string::npos && c.etag.find('"') == std::string::npos);
  FUZZ_CHECK(c.has_content_length || c.content_length == 0);
  // No figure from the server makes the client reserve more than its cap.
  FUZZ_CHECK(out.capacity() <= remote::HttpCall::kMaxReserve + 64);

  c.error_body.assign(body.substr(0, 64 << 10));
  if (c.status < 200 || c.status >= 300) {
    Status st = c.Failure("remote s3://bucket: get 'refs/heads/main'");
    FUZZ_CHECK(!st.ok());
    // The user reads it as one line: the server's words cannot break it or drive a terminal.
    FUZZ_CHECK(Printable(st.message()));
    FUZZ_CHECK(st.message().size() <= 512);
  }
  (void)c.ErrorCode();

  auto page = remote::ParseListObjectsV2(body);
  if (page.ok()) {
    FUZZ_CHECK(!page->truncated || !page->next_token.empty());
    FUZZ_CHECK(page->truncated || page->next_token.empty());
  } else {
    FUZZ_CHECK(page.status().code() == EIO);
  }
  return 0;
}
