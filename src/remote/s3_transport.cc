// S3Transport: a remote in an S3 bucket (s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT), on
// AWS or any S3-compatible store (Ceph's radosgw), through S3Client (libcurl, SigV4).
//
// Key k is the object PREFIX/k. The bucket is created on the first write that finds it absent
// (CreateBucket; "already owned by you" counts as success); reads of an absent bucket see an
// empty remote.
// - PutIfAbsent: PUT with If-None-Match: *; 412 means the key exists (EEXIST).
// - Refs: the token is the object's ETag. CasRef is a PUT with If-Match: ETAG (radosgw 16.2
//   matches only the ETag without its quotes, AWS takes the standard quoted form) or
//   If-None-Match: * for an absent ref; 412 (or 404 for a ref deleted meanwhile) is ESTALE.
//   The store checks the condition and writes in one step (radosgw: an exclusive create or an
//   xattr compare in the same RADOS op). An ETag is the MD5 of the content, so a ref that goes
//   A -> B -> A has A's token again: CAS compares values, as `git push` does with old ids.
//   409 ConditionalRequestConflict (AWS, another conditional write in flight) is retried.
// - Get/ReadRanges: GET, with Range for ranges; ReadRanges runs up to 16 in parallel (curl
//   multi); a range that starts at or past the end (416) reads as empty. Bodies are bounded
//   whether or not the server sends a Content-Length: a range by its end, a whole object by
//   HttpCall::kMaxBody, a listing page or a ref by 16 MiB; past that the call is EIO.
// - List: ListObjectsV2 pages (1000 keys each) with continuation tokens; keys come back sorted.
#include <chrono>
#include <set>
#include <thread>

#include "remote/backends.h"
#include "remote/s3_client.h"

namespace layerfs::remote {
namespace {

constexpr int kParallelReads = 16;
constexpr uint64_t kMaxSmallBody = 16u << 20;  // a listing page or a ref

class S3Transport : public Transport {
 public:
  S3Transport(RemoteUrl url, S3Config config) : url_(url), client_(url, std::move(config)) {}

  Status Put(std::string_view key, std::string_view data) override {
    LFS_TRY(CheckKey(key));
    HttpCall c = Call("PUT", key);
    c.body = data;
    LFS_TRY(Write(&c, "put", key));
    return c.status / 100 == 2 ? Status::Ok() : c.Failure(Where("put", key));
  }
  Status PutIfAbsent(std::string_view key, std::string_view data) override {
    LFS_TRY(CheckKey(key));
    HttpCall c = Call("PUT", key);
    c.body = data;
    c.headers.push_back("If-None-Match: *");
    LFS_TRY(Write(&c, "put", key));
    if (c.status == 412) return Status::Errorf(EEXIST, "{}: already exists", Where("put", key));
    return c.status / 100 == 2 ? Status::Ok() : c.Failure(Where("put", key));
  }
  Result<std::string> Get(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    std::string out;
    HttpCall c = Call("GET", key);
    c.out = &out;
    client_.Perform(&c);
    if (c.curl_code != 0 || c.status != 200) return c.Failure(Where("get", key));
    if (c.has_content_length && c.content_length != out.size())
      return Status::Errorf(EIO, "{}: {} of {} bytes arrived", Where("get", key), out.size(), c.content_length);
    return out;
  }
  Result<uint64_t> Size(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    HttpCall c = Call("HEAD", key);
    client_.Perform(&c);
    if (c.curl_code != 0 || c.status != 200) return c.Failure(Where("size", key));
    if (!c.has_content_length) return Status::Errorf(EIO, "{}: no Content-Length", Where("size", key));
    return c.content_length;
  }
  Status ReadRanges(std::vector<RangeRead>* reads) override {
    std::vector<HttpCall> calls;
    calls.reserve(reads->size());
    std::vector<HttpCall*> run;
    std::vector<size_t> index;
    for (size_t i = 0; i < reads->size(); i++) {
      RangeRead& r = (*reads)[i];
      r.data.clear();
      r.status = CheckKey(r.key);
      if (!r.status.ok()) continue;
      if (r.length == 0) {  // nothing to read: only whether the key exists
        calls.push_back(Call("HEAD", r.key));
      } else {
        calls.push_back(Call("GET", r.key));
        uint64_t last = r.offset + r.length - 1 < r.offset ? UINT64_MAX : r.offset + r.length - 1;
        calls.back().headers.push_back(fmt::format("Range: bytes={}-{}", r.offset, last));
        calls.back().out = &r.data;
        // 206 sends at most the range; a server that ignores Range sends the object from 0.
        calls.back().max_body = r.offset + r.length < r.offset ? HttpCall::kMaxBody : r.offset + r.length;
      }
      index.push_back(i);
    }
    for (auto& c : calls) run.push_back(&c);
    client_.PerformAll(run, kParallelReads);
    for (size_t j = 0; j < calls.size(); j++) {
      HttpCall& c = calls[j];
      RangeRead& r = (*reads)[index[j]];
      if (c.curl_code == 0 && c.status == 416) {  // starts at or past the end
        r.data.clear();
      } else if ((c.curl_code == 0 || c.body_cut) && c.status == 200 && c.method == "GET") {  // range ignored
        // (cut once the asked-for end arrived: the rest of the object is not read)
        r.data = r.offset >= r.data.size() ? std::string() : r.data.substr(r.offset, r.length);
      } else if (c.curl_code != 0 || c.status / 100 != 2) {
        r.data.clear();
        r.status = c.Failure(Where("read", r.key));
      } else if (c.method == "GET" && c.has_content_length && c.content_length != r.data.size()) {
        r.status = Status::Errorf(EIO, "{}: {} of {} bytes arrived", Where("read", r.key), r.data.size(), c.content_length);
        r.data.clear();
      }
    }
    for (auto& r : *reads)
      if (!r.status.ok()) return r.status;
    return Status::Ok();
  }
  Result<std::vector<std::string>> List(std::string_view prefix) override {
    LFS_TRY(CheckPrefix(prefix));
    std::string full = ObjectKey(prefix);
    std::vector<std::string> keys;
    std::string token;
    std::set<std::string> seen;
    for (;;) {
      std::string body;
      HttpCall c = Call("GET", "");
      c.path.clear();
      // Parameters sorted by name and encoded: curl signs the query as given.
      c.query = (token.empty() ? "" : "continuation-token=" + UriEncode(token, false) + "&") +
                "list-type=2&prefix=" + UriEncode(full, false);
      c.out = &body;
      c.max_body = kMaxSmallBody;  // a page names at most 1,000 keys
      client_.Perform(&c);
      if (c.curl_code == 0 && c.status == 404 && c.ErrorCode() == "NoSuchBucket") return keys;
      if (c.curl_code != 0 || c.status != 200) return c.Failure(Where("list", prefix));
      auto page = ParseListObjectsV2(body);
      if (!page.ok()) return Status::Errorf(EIO, "{}: {}", Where("list", prefix), page.status().message());
      size_t strip = url_.prefix.empty() ? 0 : url_.prefix.size() + 1;
      for (auto& n : page->keys) {
        if (n.size() <= strip || !n.starts_with(full)) continue;
        std::string k = n.substr(strip);
        if (CheckKey(k).ok()) keys.push_back(std::move(k));
      }
      if (!page->truncated) break;
      // A server that hands out a token it gave before would have the listing go round forever.
      if (!seen.insert(page->next_token).second)
        return Status::Errorf(EIO, "{}: the listing's continuation tokens go round in a circle", Where("list", prefix));
      token = std::move(page->next_token);
    }
    std::sort(keys.begin(), keys.end());  // S3 sorts by UTF-8 bytes already; cheap insurance
    return keys;
  }
  Status Delete(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    HttpCall c = Call("DELETE", key);
    client_.Perform(&c);
    if (c.curl_code == 0 && (c.status / 100 == 2 || c.status == 404)) return Status::Ok();
    return c.Failure(Where("delete", key));
  }

  Result<std::optional<RefValue>> GetRef(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    std::string out;
    HttpCall c = Call("GET", key);
    c.out = &out;
    c.max_body = kMaxSmallBody;
    client_.Perform(&c);
    if (c.curl_code == 0 && c.status == 404) return std::optional<RefValue>();
    if (c.curl_code != 0 || c.status != 200) return c.Failure(Where("get ref", key));
    if (c.etag.empty()) return Status::Errorf(EIO, "{}: the server sent no ETag", Where("get ref", key));
    return std::optional<RefValue>(RefValue{std::move(out), c.etag});
  }
  Result<std::string> CasRef(std::string_view key, std::string_view value,
                             const std::optional<std::string>& expected) override {
    LFS_TRY(CheckKey(key));
    if (expected && (expected->empty() || expected->find_first_of("\"\r\n") != std::string::npos))
      return Stale(key);
    HttpCall c = Call("PUT", key);
    c.body = value;
    if (expected) {
      c.headers.push_back(client_.unquoted_etags() ? "If-Match: " + *expected : "If-Match: \"" + *expected + "\"");
    } else {
      c.headers.push_back("If-None-Match: *");
    }
    LFS_TRY(Write(&c, "set ref", key));
    if (c.status == 412 || (expected && c.status == 404) || c.status == 409) return Stale(key);
    if (c.status / 100 != 2) return c.Failure(Where("set ref", key));
    if (c.etag.empty()) return Status::Errorf(EIO, "{}: the server sent no ETag", Where("set ref", key));
    return c.etag;
  }

  const std::string& url() const override { return url_.text; }

 private:
  std::string ObjectKey(std::string_view key) const {
    return url_.prefix.empty() ? std::string(key) : url_.prefix + "/" + std::string(key);
  }
  HttpCall Call(const char* method, std::string_view key) const {
    HttpCall c;
    c.method = method;
    c.path = ObjectKey(key);  // keys and prefixes are [A-Za-z0-9._/-]: nothing to encode
    return c;
  }
  std::string Where(std::string_view op, std::string_view key) const {
    return fmt::format("remote {}: {} '{}'", url_.text, op, key);
  }
  Status Stale(std::string_view key) const {
    return Status::Errorf(ESTALE, "{}: ref moved since it was read (stale token)", Where("set ref", key));
  }

  // Runs a write; creates the bucket once if it is absent; retries a conditional write that
  // conflicted with another in flight (409). Fails only when the exchange itself failed.
  Status Write(HttpCall* c, std::string_view op, std::string_view key) {
    for (int attempt = 0;; attempt++) {
      client_.Perform(c);
      if (c->curl_code != 0) return c->Failure(Where(op, key));
      if (c->status == 404 && c->ErrorCode() == "NoSuchBucket" && attempt == 0) {
        LFS_TRY(client_.CreateBucket(Where(op, key)));
        continue;
      }
      if (c->status == 409 && c->ErrorCode() == "ConditionalRequestConflict" && attempt < 5) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100 << attempt));
        continue;
      }
      return Status::Ok();
    }
  }

  const RemoteUrl url_;
  S3Client client_;
};

}  // namespace

Result<std::unique_ptr<Transport>> OpenS3Transport(const RemoteUrl& url) {
  LFS_ASSIGN(S3Config config, LoadS3Config(url));
  return std::unique_ptr<Transport>(new S3Transport(url, std::move(config)));
}

}  // namespace layerfs::remote
