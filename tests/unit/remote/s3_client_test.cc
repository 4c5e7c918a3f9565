// The S3 transport without a cluster: where credentials and region come from, the shape of
// the requests it sends (path-style URL, payload hash, SigV4 scope, ETags without quotes,
// continuation tokens encoded for signing) against a scripted HTTP server, and a server that
// accepts but never answers, which must give ETIMEDOUT after LAYERFS_REMOTE_TIMEOUT.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "../test_util.h"
#include "remote/s3_client.h"
#include "remote/transport.h"

namespace layerfs::remote {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Every AWS variable cleared, HOME at an empty directory.
struct CleanAwsEnv {
  testing::TempDir home;
  ScopedEnv e1{"AWS_ACCESS_KEY_ID", nullptr}, e2{"AWS_SECRET_ACCESS_KEY", nullptr},
      e3{"AWS_SESSION_TOKEN", nullptr}, e4{"AWS_PROFILE", nullptr}, e5{"AWS_DEFAULT_PROFILE", nullptr},
      e6{"AWS_SHARED_CREDENTIALS_FILE", nullptr}, e7{"AWS_CONFIG_FILE", nullptr},
      e8{"AWS_REGION", nullptr}, e9{"AWS_DEFAULT_REGION", nullptr}, e10{"HOME", home.path().c_str()};
};

RemoteUrl Url(std::string_view u) {
  auto r = RemoteUrl::Parse(u);
  EXPECT_TRUE(r.ok());
  return *r;
}

TEST(S3ConfigTest, EnvironmentFirstThenProfileFiles) {
  CleanAwsEnv env;
  auto none = LoadS3Config(Url("s3://bucket"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), EACCES);
  EXPECT_NE(none.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos) << none.status().message();

  std::filesystem::create_directories(env.home / ".aws");
  testing::WriteFile(env.home / ".aws/credentials",
                     "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = defaultsecret\n"
                     "[work]\n  aws_access_key_id=WORKKEY\naws_secret_access_key = worksecret \n"
                     "aws_session_token = tok\n");
  testing::WriteFile(env.home / ".aws/config",
                     "[default]\nregion = eu-west-3\n; comment\n[profile work]\nregion = ap-south-1\n"
                     "[profile cfgonly]\naws_access_key_id = CFGKEY\naws_secret_access_key = cfgsecret\n");
  auto d = LoadS3Config(Url("s3://bucket"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->access_key, "DEFAULTKEY");
  EXPECT_EQ(d->secret_key, "defaultsecret");
  EXPECT_EQ(d->region, "eu-west-3");
  {
    ScopedEnv p("AWS_PROFILE", "work");
    auto w = LoadS3Config(Url("s3://bucket"));
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->access_key, "WORKKEY");
    EXPECT_EQ(w->secret_key, "worksecret");
    EXPECT_EQ(w->session_token, "tok");
    EXPECT_EQ(w->region, "ap-south-1");
  }
  {
    ScopedEnv p("AWS_PROFILE", "cfgonly");  // keys may live in the config file too
    auto c = LoadS3Config(Url("s3://bucket"));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->access_key, "CFGKEY");
    EXPECT_EQ(c->region, "us-east-1");
  }
  {
    ScopedEnv p("AWS_PROFILE", "missing");
    auto m = LoadS3Config(Url("s3://bucket"));
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("profile 'missing'"), std::string::npos) << m.status().message();
  }
  ScopedEnv k("AWS_ACCESS_KEY_ID", "ENVKEY"), s("AWS_SECRET_ACCESS_KEY", "envsecret"), r("AWS_REGION", "us-west-2");
  auto e = LoadS3Config(Url("s3://bucket"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->access_key, "ENVKEY");
  EXPECT_EQ(e->session_token, "");
  EXPECT_EQ(e->region, "us-west-2");
  auto q = LoadS3Config(Url("s3://bucket?region=eu-central-1"));  // the URL wins
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->region, "eu-central-1");
  ScopedEnv half("AWS_SECRET_ACCESS_KEY", nullptr);
  EXPECT_EQ(LoadS3Config(Url("s3://bucket")).status().code(), EACCES);
}

TEST(S3ConfigTest, FilesNamedByTheEnvironment) {
  CleanAwsEnv env;
  testing::WriteFile(env.home / "creds", "[p]\naws_access_key_id = A\naws_secret_access_key = B\n");
  testing::WriteFile(env.home / "conf", "[profile p]\nregion = sa-east-1\n");
  ScopedEnv f("AWS_SHARED_CREDENTIALS_FILE", (env.home / "creds").c_str());
  ScopedEnv c("AWS_CONFIG_FILE", (env.home / "conf").c_str());
  ScopedEnv p("AWS_DEFAULT_PROFILE", "p");
  auto r = LoadS3Config(Url("s3://bucket"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->access_key, "A");
  EXPECT_EQ(r->region, "sa-east-1");
}

TEST(S3HelpersTest, EncodingHashingAndXml) {
  EXPECT_EQ(UriEncode("a+b/c==~x y", false), "a%2Bb%2Fc%3D%3D~x%20y");
  EXPECT_EQ(UriEncode("p/q-r_s.t", true), "p/q-r_s.t");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto keys = XmlTexts("<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                       "<Contents><Key>a&amp;b</Key></Contents><Contents><Key><![CDATA[c<d]]></Key></Contents>"
                       "<Key>not in Contents</Key></ListBucketResult>",
                       "ListBucketResult/Contents/Key");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, (std::vector<std::string>{"a&b", "c<d"}));
  EXPECT_EQ(XmlTexts("<a><b>unclosed</a>", "a/b").status().code(), EIO);
}

// An HTTP/1.1 server on 127.0.0.1 answering each request with handler(request) and closing the
// connection; the handler gets the request line, headers and body as one string. An empty
// answer means: never answer (hold the connection until the server stops).
class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<std::string(const std::string&)> handler) : handler_(std::move(handler)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }
  std::vector<std::string> requests() {
    std::lock_guard l(mu_);
    return requests_;
  }

 private:
  bool WaitReadable(int fd) {
    pollfd p{fd, POLLIN, 0};
    while (!stop_)
      if (poll(&p, 1, 50) > 0) return true;
    return false;
  }
  void Serve() {
    while (WaitReadable(fd_)) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char buf[65536];
      size_t need = std::string::npos;
      while (WaitReadable(c)) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
        size_t end = req.find("\r\n\r\n");
        if (end != std::string::npos && need == std::string::npos) {
          size_t cl = req.find("Content-Length: ");
          need = end + 4 + (cl != std::string::npos && cl < end ? std::stoul(req.substr(cl + 16)) : 0);
        }
        if (req.size() >= need) break;
      }
      {
        std::lock_guard l(mu_);
        requests_.push_back(req);
      }
      std::string answer = handler_(req);
      if (answer.empty()) {
        while (!stop_) usleep(20000);
      } else {
        (void)!write(c, answer.data(), answer.size());
      }
      close(c);
    }
  }
  std::function<std::string(const std::string&)> handler_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

std::string Answer(int status, const std::string& body = "", const std::string& extra = "") {
  return fmt::format("HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n{}", status, body.size(), extra, body);
}

TEST(S3RequestTest, RequestsArePathStyleSignedWithThePayloadHash) {
  CleanAwsEnv env;
  ScopedEnv k("AWS_ACCESS_KEY_ID", "AKIDTEST"), s("AWS_SECRET_ACCESS_KEY", "secret"), r("AWS_REGION", "eu-west-1");
  ScriptedServer server([](const std::string& req) {
    if (req.starts_with("GET")) return Answer(200, "ref-value", "ETag: \"0123abcd\"\r\n");
    return Answer(200, "", "ETag: \"feedbeef\"\r\n");
  });
  auto t = OpenTransport(fmt::format("s3://bkt/pre/fix?endpoint={}", server.endpoint()));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE((*t)->Put("packs/p1", "payload").ok());
  auto ref = (*t)->GetRef("refs/heads/main");
  ASSERT_TRUE(ref.ok() && ref->has_value()) << ref.status().message();
  EXPECT_EQ((*ref)->value, "ref-value");
  EXPECT_EQ((*ref)->token, "0123abcd");  // without the quotes
  auto tok = (*t)->CasRef("refs/heads/main", "new", (*ref)->token);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(*tok, "feedbeef");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_TRUE(reqs[0].starts_with("PUT /bkt/pre/fix/packs/p1 HTTP/1.1\r\n")) << reqs[0];
  EXPECT_NE(reqs[0].find("x-amz-content-sha256: " + Sha256Hex("payload")), std::string::npos) << reqs[0];
  EXPECT_NE(reqs[0].find("Authorization: AWS4-HMAC-SHA256 Credential=AKIDTEST/"), std::string::npos) << reqs[0];
  EXPECT_NE(reqs[0].find("/eu-west-1/s3/aws4_request"), std::string::npos) << reqs[0];
  EXPECT_TRUE(reqs[0].ends_with("\r\n\r\npayload")) << reqs[0];
  EXPECT_TRUE(reqs[1].starts_with("GET /bkt/pre/fix/refs/heads/main HTTP/1.1\r\n")) << reqs[1];
  EXPECT_NE(reqs[2].find("If-Match: 0123abcd\r\n"), std::string::npos) << reqs[2];
}

TEST(S3RequestTest, ListingFollowsContinuationTokens) {
  CleanAwsEnv env;
  ScopedEnv k("AWS_ACCESS_KEY_ID", "A"), s("AWS_SECRET_ACCESS_KEY", "B");
  ScriptedServer server([](const std::string& req) {
    std::string head = "<?xml version=\"1.0\"?><ListBucketResult>";
    if (req.find("continuation-token=") == std::string::npos)
      return Answer(200, head + "<IsTruncated>true</IsTruncated><NextContinuationToken>a+b/c==</NextContinuationToken>"
                                "<Contents><Key>pre/x/1</Key></Contents><Contents><Key>pre/x/2</Key></Contents></ListBucketResult>");
    return Answer(200, head + "<IsTruncated>false</IsTruncated><Contents><Key>pre/x/3</Key></Contents>"
                              "<Contents><Key>pre/x/bad key</Key></Contents></ListBucketResult>");
  });
  auto t = OpenTransport(fmt::format("s3://bkt/pre?endpoint={}", server.endpoint()));
  ASSERT_TRUE(t.ok());
  auto l = (*t)->List("x/");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(*l, (std::vector<std::string>{"x/1", "x/2", "x/3"}));  // a foreign, invalid key is left out
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(reqs[0].starts_with("GET /bkt?list-type=2&prefix=pre%2Fx%2F HTTP/1.1")) << reqs[0];
  EXPECT_TRUE(reqs[1].starts_with("GET /bkt?continuation-token=a%2Bb%2Fc%3D%3D&list-type=2&prefix=pre%2Fx%2F HTTP/1.1"))
      << reqs[1];
}

// A first write finds no bucket and makes it; radosgw answers "BucketAlreadyExists" to an
// owner whose request raced another of its own making it. The bucket is ours when a HEAD of it
// succeeds, and the write goes on; when the HEAD is refused, the bucket is someone else's.
TEST(S3RequestTest, ABucketMadeMeanwhileByItsOwnerIsNotSomeoneElses) {
  CleanAwsEnv env;
  ScopedEnv k("AWS_ACCESS_KEY_ID", "A"), s("AWS_SECRET_ACCESS_KEY", "B");
  std::atomic<int> puts{0};
  std::atomic<int> head_status{200};
  ScriptedServer server([&](const std::string& req) {
    if (req.starts_with("PUT /bkt HTTP/1.1"))
      return Answer(409, "<Error><Code>BucketAlreadyExists</Code><Message>exists</Message></Error>");
    if (req.starts_with("HEAD /bkt HTTP/1.1")) return Answer(head_status.load());
    if (req.starts_with("PUT /bkt/"))
      return puts++ == 0 ? Answer(404, "<Error><Code>NoSuchBucket</Code><Message>none</Message></Error>")
                         : Answer(200, "", "ETag: \"ab\"\r\n");
    return Answer(500);
  });
  auto t = OpenTransport(fmt::format("s3://bkt?endpoint={}", server.endpoint()));
  ASSERT_TRUE(t.ok());
  Status w = (*t)->Put("packs/p1", "payload");
  ASSERT_TRUE(w.ok()) << w.message();
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_TRUE(reqs[1].starts_with("PUT /bkt HTTP/1.1")) << reqs[1];
  EXPECT_TRUE(reqs[2].starts_with("HEAD /bkt HTTP/1.1")) << reqs[2];
  EXPECT_TRUE(reqs[3].starts_with("PUT /bkt/packs/p1 HTTP/1.1")) << reqs[3];
  puts = 0;
  head_status = 403;
  Status refused = (*t)->Put("packs/p2", "payload");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), EACCES);
  EXPECT_NE(refused.message().find("bucket 'bkt' belongs to someone else"), std::string::npos) << refused.message();
}

TEST(S3RequestTest, AServerThatNeverAnswersTimesOut) {
  CleanAwsEnv env;
  ScopedEnv k("AWS_ACCESS_KEY_ID", "A"), s("AWS_SECRET_ACCESS_KEY", "B"), to("LAYERFS_REMOTE_TIMEOUT", "2");
  ScriptedServer server([](const std::string&) { return std::string(); });
  auto t = OpenTransport(fmt::format("s3://bkt?endpoint={}", server.endpoint()));
  ASSERT_TRUE(t.ok());
  auto g = (*t)->Get("k");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ETIMEDOUT) << g.status().message();
  EXPECT_NE(g.status().message().find("get 'k': no answer in 2 s"), std::string::npos) << g.status().message();
}

TEST(S3RequestTest, ServerErrorsAreRetriedThenReported) {
  CleanAwsEnv env;
  ScopedEnv k("AWS_ACCESS_KEY_ID", "A"), s("AWS_SECRET_ACCESS_KEY", "B");
  std::atomic<int> n{0};
  ScriptedServer server([&](const std::string&) {
    if (n++ < 2) return Answer(503, "<Error><Code>SlowDown</Code><Message>Please reduce</Message></Error>");
    return Answer(200, "content");
  });
  auto t = OpenTransport(fmt::format("s3://bkt?endpoint={}", server.endpoint()));
  ASSERT_TRUE(t.ok());
  auto g = (*t)->Get("k");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(*g, "content");
  n = -100;  // every answer now a 503
  auto bad = (*t)->Get("k");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), EIO);
  EXPECT_NE(bad.status().message().find("HTTP 503 SlowDown: Please reduce"), std::string::npos) << bad.status().message();
}

// What the s3_response fuzz target checks, each case pinned: a server's headers and error
// bodies never make the client reserve gigabytes, carry a header break back in If-Match, or put
// control bytes (a newline, a terminal escape) into the one-line error a user reads.
TEST(S3HostileAnswers, HeadersAreReadStrictly) {
  std::string out;
  HttpCall c;
  c.out = &out;
  c.OnHeaderLine("HTTP/1.1 200 OK\r\n");
  c.OnHeaderLine("Content-Length: 2000000000\r\n");  // 2 GB reserved before the fix
  EXPECT_TRUE(c.has_content_length);
  EXPECT_EQ(c.content_length, 2000000000u);
  EXPECT_LE(out.capacity(), HttpCall::kMaxReserve + 64);
  for (const char* bad : {"Content-Length: -1\r\n", "Content-Length: 12abc\r\n", "Content-Length: \r\n",
                          "Content-Length: 99999999999999999999\r\n"}) {
    c.OnHeaderLine(bad);
    EXPECT_FALSE(c.has_content_length) << bad;  // strtoull took "-1" as 2^64-1, "12abc" as 12
    EXPECT_EQ(c.content_length, 0u) << bad;
  }
  c.OnHeaderLine("ETag: \"0123abcd\"\r\n");
  EXPECT_EQ(c.etag, "0123abcd");
  c.OnHeaderLine("ETag: \"ab\rIf-None-Match: *\"\r\n");  // a header break, sent back in If-Match
  EXPECT_EQ(c.etag, "");
  c.OnHeaderLine("ETag: \"a\x1b[2Jb\"\r\n");
  EXPECT_EQ(c.etag, "");
  c.OnHeaderLine("ETag: \"x\"\r\n");
  c.OnHeaderLine("Content-Length: 5\r\n");
  c.OnHeaderLine("HTTP/1.1 200 OK\r\n");  // a new response forgets the last one's
  EXPECT_EQ(c.etag, "");
  EXPECT_FALSE(c.has_content_length);
}

TEST(S3HostileAnswers, ErrorsStayOneBoundedLine) {
  HttpCall c;
  c.status = 403;
  // (XML keeps escapes out, &#27; included; newlines, tabs and &#13; it lets through.)
  c.error_body = "<Error><Code>Access\nDenied</Code><Message>line one\nlayerfs: all good&#13;\t" +
                 std::string(5000, 'm') + "</Message></Error>";
  Status st = c.Failure("remote s3://b: get 'k'");
  EXPECT_EQ(st.code(), EACCES);
  for (char ch : st.message()) EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20) << st.message();
  EXPECT_LE(st.message().size(), 512u);
  EXPECT_NE(st.message().find("HTTP 403 Access Denied: line one layerfs: all good  mmm"), std::string::npos)
      << st.message();
  EXPECT_EQ(OneLine("\xc3\xa9t\xc3\xa9", 4), "\xc3\xa9t");  // cut at a character boundary
}

TEST(S3HostileAnswers, ListingPagesAreChecked) {
  auto p = ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>");
  EXPECT_EQ(p.status().code(), EIO);
  p = ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t"
                         "</NextContinuationToken><Contents><Key>a</Key></Contents></ListBucketResult>");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->truncated);
  EXPECT_EQ(p->next_token, "t");
  EXPECT_EQ(p->keys, std::vector<std::string>{"a"});
  EXPECT_EQ(ParseListObjectsV2("<ListBucketResult><Contents><Key>a</Key>").status().code(), EIO);
}

// A server whose continuation tokens go round (A, B, A, ...) had the listing loop forever.
TEST(S3HostileAnswers, ListingTokensGoingRoundAreAnError) {
  CleanAwsEnv env;
  ScopedEnv k("AWS_ACCESS_KEY_ID", "A"), s("AWS_SECRET_ACCESS_KEY", "B");
  std::atomic<int> pages{0};
  ScriptedServer server([&](const std::string& req) {
    pages++;
    std::string next = req.find("continuation-token=A") != std::string::npos ? "B" : "A";
    return Answer(200, "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>" + next +
                           "</NextContinuationToken><Contents><Key>x/1</Key></Contents></ListBucketResult>");
  });
  auto t = OpenTransport(fmt::format("s3://bkt?endpoint={}", server.endpoint()));
  ASSERT_TRUE(t.ok());
  auto l = (*t)->List("x/");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), EIO);
  EXPECT_NE(l.status().message().find("go round in a circle"), std::string::npos) << l.status().message();
  EXPECT_EQ(pages.load(), 3);
}

// Bodies sent chunked carry no Content-Length to check: before the bound, a server answering a
// 10-byte range with an endless chunked body filled memory until it stopped.
std::string Chunked(int status, const std::string& body, size_t chunk, const std::string& extra = "") {
  std::string a = fmt::format("HTTP/1.1 {} X\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n{}\r\n", status, extra);
  for (size_t i = 0; i < body.size(); i += chunk) {
    std::string part = body.substr(i, chunk);
    a += fmt::format("{:x}\r\n{}\r\n", part.size(), part);
  }
  return a + "0\r\n\r\n";
}

TEST(S3HostileAnswers, ChunkedBodiesAreBoundedByWhatWasAsked) {
  CleanAwsEnv env;
  ScopedEnv k("AWS_ACCESS_KEY_ID", "A"), s("AWS_SECRET_ACCESS_KEY", "B");
  std::string object;
  for (int i = 0; i < 200000; i++) object += static_cast<char>('a' + i % 26);  // 200 KB
  std::atomic<bool> ignore_range{false};
  ScriptedServer server([&](const std::string& req) {
    if (req.find("list-type=2") != std::string::npos)
      return Chunked(200, "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>x/1</Key></Contents>"
                          "</ListBucketResult>", 7);
    if (ignore_range) return Chunked(200, object, 4096);  // the whole object, from 0
    return Chunked(206, object, 4096);                     // far more than the range
  });
  auto t = OpenTransport(fmt::format("s3://bkt?endpoint={}", server.endpoint()));
  ASSERT_TRUE(t.ok());
  std::vector<RangeRead> reads(1);
  reads[0].key = "packs/p";
  reads[0].offset = 100;
  reads[0].length = 10;
  Status st = (*t)->ReadRanges(&reads);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("more than the 110 bytes asked for"), std::string::npos) << st.message();
  EXPECT_TRUE(reads[0].data.empty());

  ignore_range = true;  // a server without Range support: the asked-for bytes, the rest unread
  reads[0].offset = 30000;
  reads[0].length = 5000;
  ASSERT_TRUE((*t)->ReadRanges(&reads).ok());
  EXPECT_EQ(reads[0].data, object.substr(30000, 5000));

  auto l = (*t)->List("x/");  // chunked bodies within their bound still arrive whole
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(*l, std::vector<std::string>{"x/1"});
  auto g = (*t)->Get("k");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(*g, object);
}

}  // namespace
}  // namespace layerfs::remote
