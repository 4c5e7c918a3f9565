// S3Client: signed HTTP requests to one S3 bucket, for S3Transport (s3_transport.cc).
//
// Requests are signed with AWS SigV4 by libcurl itself (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3");
// every request carries x-amz-content-sha256 with the payload's SHA-256 (OpenSSL), which curl
// signs and the server checks, so a body damaged on the way is refused, not stored. URLs are
// path-style (ENDPOINT/BUCKET/KEY) with an endpoint, virtual-hosted
// (https://BUCKET.s3.REGION.amazonaws.com/KEY) for AWS, path-style there too for a dotted name.
//
// Credentials and region, first found wins: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
// AWS_SESSION_TOKEN); else the profile AWS_PROFILE (default "default") of
// AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), then of AWS_CONFIG_FILE (~/.aws/config,
// section "profile NAME"). Region: the URL's ?region=, AWS_REGION, AWS_DEFAULT_REGION, the
// profile's region, us-east-1.
//
// Connections: a pool of sessions, each a curl multi handle with its connection cache; a call
// (one request or a batch run in parallel) takes a session for its duration, so connections are
// reused and never shared between threads (libcurl does not allow that). Every transfer gives
// up when connecting takes, or the transfer stalls below 1 byte/s for, LAYERFS_REMOTE_TIMEOUT
// seconds. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "remote/transport.h"

namespace layerfs::remote {

struct S3Config {
  std::string access_key, secret_key, session_token;
  std::string region;
};

// Resolves credentials and region as above; EACCES naming where it looked when none are found.
Result<S3Config> LoadS3Config(const RemoteUrl& url);

// One HTTP exchange. The caller fills the request part; Perform fills the response part.
struct HttpCall {
  // request
  std::string method = "GET";        // GET, PUT, HEAD, DELETE
  std::string path;                  // the key's path below the bucket, no leading '/' ("" = bucket)
  std::string query;                 // already sorted and encoded (SigV4 canonical form), no '?'
  std::vector<std::string> headers;  // "Name: value"
  std::string_view body;             // PUT payload
  std::string* out = nullptr;        // response body goes here when set (else into `error_body`)
  uint64_t max_body = kMaxBody;      // a 2xx body longer than this is cut and the call fails
  // response
  long status = 0;        // HTTP status; 0 when the exchange itself failed
  int curl_code = 0;      // CURLcode
  std::string curl_error;
  std::string etag;       // without quotes
  uint64_t content_length = 0;
  bool has_content_length = false;
  std::string error_body;
  bool body_cut = false;  // the body ran past max_body: `out` holds its first max_body bytes

  // Maps a failed exchange (curl error, or an HTTP status outside 2xx) to an errno Status
  // ("HTTP 403 AccessDenied: Access Denied", "connection refused", ...); `where` prefixes it.
  Status Failure(std::string_view where) const;
  // The <Code> of an S3 error body ("NoSuchBucket"), or "".
  std::string ErrorCode() const;
  // Reads one response header line as libcurl hands it over (with its CRLF) into the response
  // part: ETag (without quotes; dropped unless it is printable ASCII, since it goes back to the
  // server in If-Match), Content-Length (decimal digits that fit 64 bits, else absent); a status
  // line starts a new response (after 100 Continue or a redirect). A server's figure never
  // makes it reserve more than kMaxReserve.
  void OnHeaderLine(std::string_view line);
  static constexpr uint64_t kMaxReserve = 64 << 20;
  // Bodies sent without a Content-Length (chunked) are bounded only by what the caller asked
  // for: a range's end, or this for a whole object (indexes and config; packs are read by range).
  static constexpr uint64_t kMaxBody = 1ull << 30;
};

// One page of a ListObjectsV2 answer. `truncated` pages always carry a non-empty `next_token`
// (else EIO: a listing that could not go on).
struct ListPage {
  std::vector<std::string> keys;
  bool truncated = false;
  std::string next_token;
};
Result<ListPage> ParseListObjectsV2(std::string_view xml);
// `text` from a server made fit for a one-line message: control bytes become spaces, at most
// `max` bytes (cut at a UTF-8 character boundary).
std::string OneLine(std::string_view text, size_t max);

class S3Client {
 public:
  S3Client(const RemoteUrl& url, S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Runs one call; retries 500/502/503/504 answers twice (after 0.2 s and 0.8 s).
  void Perform(HttpCall* call);
  // Runs the calls in parallel (at most `parallel` transfers at once) over one session.
  void PerformAll(const std::vector<HttpCall*>& calls, int parallel);
  // Creates the bucket; Ok if it exists and is ours already.
  Status CreateBucket(std::string_view where);
  // Whether the endpoint wants ETags in If-Match without their quotes (radosgw 16.2 does;
  // AWS takes the standard quoted form).
  bool unquoted_etags() const { return !url_.endpoint.empty(); }

 private:
  struct Session;
  std::unique_ptr<Session> Acquire();
  void Release(std::unique_ptr<Session> s);
  void Run(Session* s, const std::vector<HttpCall*>& calls, int parallel);

  const RemoteUrl url_;
  const S3Config config_;
  const std::string base_;   // scheme://host[:port][/BUCKET] with no trailing '/'
  const std::string sigv4_;  // "aws:amz:REGION:s3"
  const bool path_style_;    // BUCKET in the path (an endpoint, or a dotted name on AWS)
  std::mutex mu_;
  std::vector<std::unique_ptr<Session>> free_;  // GUARDED_BY(mu_)
};

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);
// Percent-encodes everything but A-Z a-z 0-9 - _ . ~ (and '/' when `keep_slash`).
std::string UriEncode(std::string_view s, bool keep_slash);
// Text of every element at `path` ("ListBucketResult/Contents/Key"), in document order;
// EIO for malformed XML.
Result<std::vector<std::string>> XmlTexts(std::string_view xml, std::string_view path);

}  // namespace layerfs::remote
