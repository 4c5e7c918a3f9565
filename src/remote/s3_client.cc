// S3Client: credentials, signed requests over pooled curl multi sessions, small XML reading.
#include "remote/s3_client.h"

#include <curl/curl.h>
#include <expat.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "remote/backends.h"

namespace layerfs::remote {
namespace {

using Ini = std::map<std::string, std::map<std::string, std::string>>;

std::string Trim(std::string_view s) {
  while (!s.empty() && isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

// The AWS CLI's INI files: [section], name = value, '#' or ';' comments.
Ini ReadIni(const std::string& path) {
  Ini ini;
  std::ifstream in(path);
  std::string line, section;
  while (std::getline(in, line)) {
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = Trim(std::string_view(t).substr(1, t.size() - 2));
      continue;
    }
    size_t eq = t.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    ini[section][Lower(Trim(std::string_view(t).substr(0, eq)))] = Trim(std::string_view(t).substr(eq + 1));
  }
  return ini;
}

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

const std::map<std::string, std::string>* Section(const Ini& ini, const std::string& name) {
  auto it = ini.find(name);
  return it == ini.end() ? nullptr : &it->second;
}

std::string Get(const std::map<std::string, std::string>* s, const char* key) {
  if (!s) return "";
  auto it = s->find(key);
  return it == s->end() ? "" : it->second;
}

int CurlInit() {
  static int rc = curl_global_init(CURL_GLOBAL_DEFAULT);  // once, before any handle exists
  return rc;
}

}  // namespace

Result<S3Config> LoadS3Config(const RemoteUrl& url) {
  S3Config c;
  std::string home = Env("HOME");
  std::string profile = Env("AWS_PROFILE");
  if (profile.empty()) profile = Env("AWS_DEFAULT_PROFILE");
  if (profile.empty()) profile = "default";
  std::string creds_path = Env("AWS_SHARED_CREDENTIALS_FILE");
  if (creds_path.empty() && !home.empty()) creds_path = home + "/.aws/credentials";
  std::string config_path = Env("AWS_CONFIG_FILE");
  if (config_path.empty() && !home.empty()) config_path = home + "/.aws/config";
  Ini creds_ini = creds_path.empty() ? Ini() : ReadIni(creds_path);
  Ini config_ini = config_path.empty() ? Ini() : ReadIni(config_path);
  const auto* creds = Section(creds_ini, profile);
  const auto* config = Section(config_ini, profile == "default" ? "default" : "profile " + profile);

  c.access_key = Env("AWS_ACCESS_KEY_ID");
  c.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  if (!c.access_key.empty() || !c.secret_key.empty()) {
    if (c.access_key.empty() || c.secret_key.empty())
      return Status::Errorf(EACCES, "remote {}: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together", url.text);
    c.session_token = Env("AWS_SESSION_TOKEN");
  } else {
    for (const auto* s : {creds, config}) {
      if (Get(s, "aws_access_key_id").empty()) continue;
      c.access_key = Get(s, "aws_access_key_id");
      c.secret_key = Get(s, "aws_secret_access_key");
      c.session_token = Get(s, "aws_session_token");
      break;
    }
    if (c.access_key.empty() || c.secret_key.empty())
      return Status::Errorf(EACCES,
                            "remote {}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                            "or give profile '{}' aws_access_key_id and aws_secret_access_key in {}",
                            url.text, profile, creds_path.empty() ? "~/.aws/credentials" : creds_path);
  }
  for (std::string r : {url.region, Env("AWS_REGION"), Env("AWS_DEFAULT_REGION"), Get(config, "region")}) {
    if (!r.empty()) {
      c.region = r;
      break;
    }
  }
  if (c.region.empty()) c.region = "us-east-1";
  if (c.region.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
    return Status::Errorf(EINVAL, "remote {}: invalid AWS region '{}'", url.text, c.region);
  return c;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  hex.reserve(len * 2);
  for (unsigned int i = 0; i < len; i++) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  std::string out;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

Result<std::vector<std::string>> XmlTexts(std::string_view xml, std::string_view path) {
  struct State {
    std::string_view want;
    std::string cur, text;
    std::vector<std::string> out;
    bool collecting = false;
  } st{path, {}, {}, {}, false};
  XML_Parser p = XML_ParserCreate(nullptr);
  XML_SetUserData(p, &st);
  XML_SetElementHandler(
      p,
      [](void* d, const XML_Char* name, const XML_Char**) {
        auto* s = static_cast<State*>(d);
        if (!s->cur.empty()) s->cur += '/';
        s->cur += name;
        if (s->cur == s->want) {
          s->collecting = true;
          s->text.clear();
        }
      },
      [](void* d, const XML_Char*) {
        auto* s = static_cast<State*>(d);
        if (s->collecting && s->cur == s->want) {
          s->out.push_back(std::move(s->text));
          s->collecting = false;
        }
        size_t slash = s->cur.rfind('/');
        s->cur.resize(slash == std::string::npos ? 0 : slash);
      });
  XML_SetCharacterDataHandler(p, [](void* d, const XML_Char* t, int len) {
    auto* s = static_cast<State*>(d);
    if (s->collecting) s->text.append(t, static_cast<size_t>(len));
  });
  bool ok = XML_Parse(p, xml.data(), static_cast<int>(xml.size()), 1) == XML_STATUS_OK;
  std::string err = ok ? "" : XML_ErrorString(XML_GetErrorCode(p));
  XML_ParserFree(p);
  if (!ok) return Status::Errorf(EIO, "malformed XML from the server: {}", err);
  return std::move(st.out);
}

std::string HttpCall::ErrorCode() const {
  auto codes = XmlTexts(error_body, "Error/Code");
  return codes.ok() && !codes->empty() ? codes->front() : "";
}

std::string OneLine(std::string_view text, size_t max) {
  if (text.size() > max) {
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) cut--;
    text = text.substr(0, cut);
  }
  std::string out(text);
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = ' ';
  }
  return out;
}

Result<ListPage> ParseListObjectsV2(std::string_view xml) {
  ListPage page;
  LFS_ASSIGN(page.keys, XmlTexts(xml, "ListBucketResult/Contents/Key"));
  LFS_ASSIGN(auto truncated, XmlTexts(xml, "ListBucketResult/IsTruncated"));
  LFS_ASSIGN(auto next, XmlTexts(xml, "ListBucketResult/NextContinuationToken"));
  page.truncated = !truncated.empty() && truncated[0] == "true";
  if (!page.truncated) return page;
  if (next.empty() || next[0].empty())
    return Status::Error(EIO, "a truncated listing without a continuation token");
  page.next_token = std::move(next[0]);
  return page;
}

void HttpCall::OnHeaderLine(std::string_view h) {
  if (h.starts_with("HTTP/")) {  // a new response (after 100 Continue or a redirect)
    etag.clear();
    has_content_length = false;
    content_length = 0;
    return;
  }
  size_t colon = h.find(':');
  if (colon == std::string_view::npos) return;
  std::string name = Lower(std::string(h.substr(0, colon)));
  std::string value = Trim(h.substr(colon + 1));
  if (name == "etag") {
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    bool printable = !value.empty();
    for (char ch : value) printable = printable && ch > 0x20 && ch < 0x7f && ch != '"';
    etag = printable ? value : "";
  } else if (name == "content-length") {
    uint64_t v = 0;
    bool ok = !value.empty() && value.size() <= 19;
    for (char ch : value) {
      if (ch < '0' || ch > '9') ok = false;
      else v = v * 10 + static_cast<uint64_t>(ch - '0');
    }
    has_content_length = ok;
    content_length = ok ? v : 0;
    if (ok && out) out->reserve(out->size() + std::min<uint64_t>(v, kMaxReserve));
  }
}

Status HttpCall::Failure(std::string_view where) const {
  if (body_cut) return Status::Errorf(EIO, "{}: the server sent more than the {} bytes asked for", where, max_body);
  if (curl_code != CURLE_OK) {
    switch (curl_code) {
      case CURLE_OPERATION_TIMEDOUT:
        return Status::Errorf(ETIMEDOUT, "{}: no answer in {} s ({})", where, RemoteTimeoutSeconds(), curl_error);
      case CURLE_COULDNT_CONNECT:
        return Status::Errorf(ECONNREFUSED, "{}: cannot connect ({})", where, curl_error);
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
        return Status::Errorf(EHOSTUNREACH, "{}: {}", where, curl_error);
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
      case CURLE_PARTIAL_FILE:
        return Status::Errorf(EIO, "{}: connection lost ({})", where, curl_error);
      default:
        return Status::Errorf(EIO, "{}: {}", where, curl_error.empty() ? curl_easy_strerror(static_cast<CURLcode>(curl_code)) : curl_error);
    }
  }
  int code = status == 404 ? ENOENT : (status == 401 || status == 403) ? EACCES : EIO;
  // The server's words go into a one-line error a terminal shows: no control bytes, bounded.
  std::string s3code = OneLine(ErrorCode(), 64);
  auto msgs = XmlTexts(error_body, "Error/Message");
  std::string msg = msgs.ok() && !msgs->empty() ? OneLine(msgs->front(), 256) : "";
  std::string text = fmt::format("{}: HTTP {}", where, status);
  if (!s3code.empty()) text += " " + s3code;
  if (!msg.empty()) text += ": " + msg;
  return Status::Error(code, text);
}

struct S3Client::Session {
  CURLM* multi = curl_multi_init();
  std::vector<CURL*> idle;
  ~Session() {
    for (CURL* e : idle) curl_easy_cleanup(e);
    curl_multi_cleanup(multi);
  }
};

namespace {

struct Transfer {
  HttpCall* call;
  CURL* easy;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {};
};

size_t OnBody(char* p, size_t, size_t n, void* d) {
  auto* t = static_cast<Transfer*>(d);
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300 && t->call->out) {
    HttpCall* c = t->call;
    if (c->out->size() + n > c->max_body) {  // more than asked for: keep what was, stop here
      c->out->append(p, c->max_body - std::min<uint64_t>(c->max_body, c->out->size()));
      c->body_cut = true;
      return 0;  // curl ends the transfer with CURLE_WRITE_ERROR
    }
    c->out->append(p, n);
  } else if (t->call->error_body.size() < (64 << 10)) {
    t->call->error_body.append(p, n);
  }
  return n;
}

size_t OnHeader(char* p, size_t, size_t n, void* d) {
  static_cast<Transfer*>(d)->call->OnHeaderLine(std::string_view(p, n));
  return n;
}

void ClearResponse(HttpCall* c) {
  c->status = 0;
  c->curl_code = 0;
  c->curl_error.clear();
  c->etag.clear();
  c->content_length = 0;
  c->has_content_length = false;
  c->error_body.clear();
  c->body_cut = false;
  if (c->out) c->out->clear();
}

bool Retryable(const HttpCall& c) {
  return c.curl_code == CURLE_OK && (c.status == 500 || c.status == 502 || c.status == 503 || c.status == 504);
}

}  // namespace

S3Client::S3Client(const RemoteUrl& url, S3Config config)
    : url_(url),
      config_(std::move(config)),
      // A dotted bucket name would not match AWS's wildcard certificate as a host name, so it
      // goes path-style like any endpoint's.
      base_(!url.endpoint.empty() ? fmt::format("{}/{}", url.endpoint, url.location)
            : url.location.find('.') != std::string::npos
                ? fmt::format("https://s3.{}.amazonaws.com/{}", config_.region, url.location)
                : fmt::format("https://{}.s3.{}.amazonaws.com", url.location, config_.region)),
      sigv4_(fmt::format("aws:amz:{}:s3", config_.region)),
      path_style_(!url.endpoint.empty() || url.location.find('.') != std::string::npos) {
  CurlInit();
}

S3Client::~S3Client() = default;

std::unique_ptr<S3Client::Session> S3Client::Acquire() {
  {
    std::lock_guard l(mu_);
    if (!free_.empty()) {
      auto s = std::move(free_.back());
      free_.pop_back();
      return s;
    }
  }
  return std::make_unique<Session>();
}

void S3Client::Release(std::unique_ptr<Session> s) {
  std::lock_guard l(mu_);
  if (free_.size() < 16) free_.push_back(std::move(s));
}

void S3Client::Run(Session* s, const std::vector<HttpCall*>& calls, int parallel) {
  const long timeout = RemoteTimeoutSeconds();
  curl_multi_setopt(s->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, static_cast<long>(parallel));
  curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, static_cast<long>(std::max(parallel, 4)));
  std::vector<std::unique_ptr<Transfer>> transfers;
  for (HttpCall* c : calls) {
    ClearResponse(c);
    CURL* e;
    if (!s->idle.empty()) {
      e = s->idle.back();
      s->idle.pop_back();
      curl_easy_reset(e);  // keeps nothing but the handle; connections live in the multi
    } else {
      e = curl_easy_init();
    }
    auto t = std::make_unique<Transfer>(Transfer{c, e});
    std::string url = base_;
    if (!c->path.empty() || !path_style_) url += "/" + c->path;
    if (!c->query.empty()) url += "?" + c->query;
    t->headers = curl_slist_append(t->headers, ("x-amz-content-sha256: " + Sha256Hex(c->body)).c_str());
    if (!config_.session_token.empty())
      t->headers = curl_slist_append(t->headers, ("x-amz-security-token: " + config_.session_token).c_str());
    // (No "Expect:" to turn off 100-continue: curl would sign the empty header it then omits.)
    if (c->method == "PUT") t->headers = curl_slist_append(t->headers, "Content-Type: application/octet-stream");
    for (const auto& h : c->headers) t->headers = curl_slist_append(t->headers, h.c_str());
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L << 10);  // fewer callbacks on large bodies
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, timeout);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, timeout);
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4_.c_str());
    curl_easy_setopt(e, CURLOPT_USERNAME, config_.access_key.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, config_.secret_key.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
    if (c->method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (c->method == "PUT") {
      // The body as "post fields" of a PUT: curl then asks for 100-continue only above 1 MiB,
      // where an upload (CURLOPT_UPLOAD) costs that extra round trip on every small PUT.
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(c->body.size()));
    } else if (c->method != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method.c_str());
    }
    curl_multi_add_handle(s->multi, e);
    transfers.push_back(std::move(t));
  }
  int running = 1;
  while (running > 0) {
    if (curl_multi_perform(s->multi, &running) != CURLM_OK) break;
    int queued;
    while (CURLMsg* m = curl_multi_info_read(s->multi, &queued)) {
      if (m->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
      t->call->curl_code = m->data.result;
      if (m->data.result != CURLE_OK) t->call->curl_error = t->error[0] ? t->error : curl_easy_strerror(m->data.result);
      curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &t->call->status);
      if (m->data.result != CURLE_OK && !t->call->body_cut) t->call->status = 0;
    }
    if (running > 0) curl_multi_poll(s->multi, nullptr, 0, 1000, nullptr);
  }
  for (auto& t : transfers) {
    curl_multi_remove_handle(s->multi, t->easy);
    curl_slist_free_all(t->headers);
    if (t->call->status == 0 && t->call->curl_code == CURLE_OK) {  // the multi itself failed
      t->call->curl_code = CURLE_FAILED_INIT;
      t->call->curl_error = "transfer did not run";
    }
    s->idle.push_back(t->easy);
  }
}

void S3Client::Perform(HttpCall* call) { PerformAll({call}, 1); }

void S3Client::PerformAll(const std::vector<HttpCall*>& calls, int parallel) {
  auto s = Acquire();
  Run(s.get(), calls, parallel);
  for (int attempt = 1; attempt < 3; attempt++) {
    std::vector<HttpCall*> again;
    for (HttpCall* c : calls)
      if (Retryable(*c)) again.push_back(c);
    if (again.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt == 1 ? 200 : 800));
    Run(s.get(), again, parallel);
  }
  Release(std::move(s));
}

Status S3Client::CreateBucket(std::string_view where) {
  HttpCall c;
  c.method = "PUT";
  std::string body;
  if (url_.endpoint.empty() && config_.region != "us-east-1") {
    body = fmt::format(
        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<LocationConstraint>{}</LocationConstraint></CreateBucketConfiguration>", config_.region);
  }
  c.body = body;
  Perform(&c);
  if (c.curl_code == CURLE_OK && c.status >= 200 && c.status < 300) return Status::Ok();
  std::string code = c.ErrorCode();
  if (c.status == 409 && code == "BucketAlreadyOwnedByYou") return Status::Ok();
  if (c.status == 409 && code == "BucketAlreadyExists") {
    // radosgw answers so a request of the bucket's own owner that races another creating it (a
    // remote's first writes come from several threads): the bucket is ours if we may read it.
    for (int attempt = 0; attempt < 3; attempt++) {
      HttpCall head;
      head.method = "HEAD";
      Perform(&head);
      if (head.curl_code != CURLE_OK) return head.Failure(fmt::format("{}: bucket '{}'", where, url_.location));
      if (head.status >= 200 && head.status < 300) return Status::Ok();
      if (head.status != 404) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50 << attempt));  // not visible yet
    }
    return Status::Errorf(EACCES, "{}: bucket '{}' belongs to someone else", where, url_.location);
  }
  return c.Failure(fmt::format("{}: create bucket '{}'", where, url_.location));
}

}  // namespace layerfs::remote
