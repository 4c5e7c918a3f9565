// Remote URLs, key rules and the backend dispatch.
#include "remote/transport.h"

#include <cstdlib>

#include "remote/backends.h"

namespace layerfs::remote {
namespace {

constexpr size_t kMaxKey = 512;

bool KeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '/';
}

// Shared by keys and prefixes: charset, length, no leading '/', no "." or ".." component, no
// empty component except (for prefixes) a trailing one.
Status CheckPath(std::string_view what, std::string_view k, bool prefix) {
  if (k.size() > kMaxKey) return Status::Errorf(EINVAL, "remote {} too long ({} bytes, at most {})", what, k.size(), kMaxKey);
  if (k.empty() && !prefix) return Status::Invalid(fmt::format("empty remote {}", what));
  for (char c : k)
    if (!KeyChar(c)) return Status::Errorf(EINVAL, "invalid remote {} '{}': only [A-Za-z0-9._/-] allowed", what, k);
  if (!k.empty() && k[0] == '/') return Status::Errorf(EINVAL, "invalid remote {} '{}': leading '/'", what, k);
  size_t start = 0;
  while (start <= k.size()) {
    size_t end = k.find('/', start);
    bool last = end == std::string_view::npos;
    std::string_view comp = k.substr(start, last ? std::string_view::npos : end - start);
    if (!(prefix && last)) {  // a prefix's last component may be part of any name
      if (comp == "." || comp == "..")
        return Status::Errorf(EINVAL, "invalid remote {} '{}': '.' or '..' component", what, k);
      if (comp.empty()) return Status::Errorf(EINVAL, "invalid remote {} '{}': empty component", what, k);
    }
    if (last) break;
    start = end + 1;
  }
  return Status::Ok();
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return Status::Invalid("bad percent escape");
    int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return Status::Invalid("bad percent escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string_view TrimSlashes(std::string_view s) {
  while (!s.empty() && s.front() == '/') s.remove_prefix(1);
  while (!s.empty() && s.back() == '/') s.remove_suffix(1);
  return s;
}

// S3 bucket names as AWS requires them (3-63 of [a-z0-9.-], alphanumeric at both ends);
// radosgw refuses shorter ones too.
bool ValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return alnum(b.front()) && alnum(b.back()) && b.find("..") == std::string_view::npos;
}

Status ParseFile(std::string_view rest, RemoteUrl* u) {
  if (rest.empty() || rest[0] != '/')
    return Status::Invalid("file remote must be file:///ABSOLUTE/PATH (no host)");
  while (rest.size() > 1 && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('\0') != std::string_view::npos) return Status::Invalid("NUL in file remote path");
  u->kind = "file";
  u->location = std::string(rest);
  return Status::Ok();
}

Status ParseRados(std::string_view rest, RemoteUrl* u) {
  if (rest.find_first_of("?#") != std::string_view::npos)
    return Status::Invalid("rados remote takes no query: rados://POOL[/NAMESPACE]");
  size_t slash = rest.find('/');
  std::string_view pool = rest.substr(0, slash);
  std::string_view ns = slash == std::string_view::npos ? std::string_view() : TrimSlashes(rest.substr(slash + 1));
  if (pool.empty()) return Status::Invalid("rados remote needs a pool: rados://POOL[/NAMESPACE]");
  for (char c : pool)
    if (static_cast<unsigned char>(c) <= ' ' || c == '@')
      return Status::Errorf(EINVAL, "invalid rados pool name '{}'", pool);
  if (!ns.empty()) LFS_TRY(CheckPath("namespace", ns, false));
  u->kind = "rados";
  u->location = std::string(pool);
  u->prefix = std::string(ns);
  return Status::Ok();
}

Status ParseS3(std::string_view rest, RemoteUrl* u) {
  std::string_view query;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (rest.find('#') != std::string_view::npos) return Status::Invalid("'#' in s3 remote");
  size_t slash = rest.find('/');
  std::string_view bucket = rest.substr(0, slash);
  std::string_view prefix = slash == std::string_view::npos ? std::string_view() : TrimSlashes(rest.substr(slash + 1));
  if (!ValidBucket(bucket))
    return Status::Errorf(EINVAL, "invalid s3 bucket name '{}' (3-63 of a-z 0-9 . -)", bucket);
  if (!prefix.empty()) LFS_TRY(CheckPath("prefix", prefix, false));
  u->kind = "s3";
  u->location = std::string(bucket);
  u->prefix = std::string(prefix);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    std::string_view name = kv.substr(0, eq);
    auto value = PercentDecode(eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1));
    if (!value.ok()) return Status::Errorf(EINVAL, "s3 remote: bad percent escape in '{}'", kv);
    if (name == "endpoint") {
      std::string e = *value;
      while (!e.empty() && e.back() == '/') e.pop_back();
      size_t scheme = e.starts_with("http://") ? 7 : e.starts_with("https://") ? 8 : 0;
      if (scheme == 0 || e.size() == scheme || e.find('/', scheme) != std::string::npos ||
          e.find_first_of("?# ") != std::string::npos)
        return Status::Errorf(EINVAL, "s3 remote: endpoint must be http(s)://HOST[:PORT], not '{}'", *value);
      u->endpoint = e;
    } else if (name == "region") {
      if (value->empty() || value->find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
        return Status::Errorf(EINVAL, "s3 remote: invalid region '{}'", *value);
      u->region = *value;
    } else {
      return Status::Errorf(EINVAL, "s3 remote: unknown parameter '{}' (endpoint, region)", name);
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckKey(std::string_view key) { return CheckPath("key", key, false); }
Status CheckPrefix(std::string_view prefix) { return CheckPath("prefix", prefix, true); }

Result<RemoteUrl> RemoteUrl::Parse(std::string_view url) {
  RemoteUrl u;
  u.text = std::string(url);
  Status s;
  if (url.starts_with("file://")) {
    s = ParseFile(url.substr(7), &u);
  } else if (url.starts_with("/")) {  // a plain absolute path, as Git accepts
    s = ParseFile(url, &u);
  } else if (url.starts_with("rados://")) {
    s = ParseRados(url.substr(8), &u);
  } else if (url.starts_with("s3://")) {
    s = ParseS3(url.substr(5), &u);
  } else {
    s = Status::Invalid("unknown remote URL kind (file:///PATH, rados://POOL[/NS], s3://BUCKET[/PREFIX])");
  }
  if (!s.ok()) return s.Context(fmt::format("remote '{}'", url));
  return u;
}

int RemoteTimeoutSeconds() {
  const char* e = getenv("LAYERFS_REMOTE_TIMEOUT");
  if (!e || !*e) return 30;
  char* end = nullptr;
  long v = strtol(e, &end, 10);
  if (*end != '\0' || v < 1) return 30;
  return v > 86400 ? 86400 : static_cast<int>(v);
}

Result<std::unique_ptr<Transport>> OpenTransport(std::string_view url, bool existing) {
  LFS_ASSIGN(RemoteUrl u, RemoteUrl::Parse(url));
  if (u.kind == "file") return OpenFileTransport(u, existing);
  if (u.kind == "rados") return OpenRadosTransport(u);
  return OpenS3Transport(u);
}

}  // namespace layerfs::remote
