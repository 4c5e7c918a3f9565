// Remote URLs, the contract on the in-memory and file transports, what only the file transport
// promises (its layout, no escape from the root, processes racing on a ref), and the fault
// injector the layers above test with.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "transport_contract.h"

namespace layerfs::remote {
namespace {

INSTANTIATE_TEST_SUITE_P(Local, TransportContract,
                         ::testing::Values(ContractBackend{"mem", nullptr},
                                           ContractBackend{"file", [](const std::string& tmp) {
                                                             return "file://" + tmp + "/remote";
                                                           }}),
                         BackendName);

TEST(RemoteUrlTest, ParsesEachKind) {
  auto f = RemoteUrl::Parse("file:///srv/remotes/proj/");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->kind, "file");
  EXPECT_EQ(f->location, "/srv/remotes/proj");
  EXPECT_EQ(f->text, "file:///srv/remotes/proj/");
  auto p = RemoteUrl::Parse("/plain/path");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, "file");
  EXPECT_EQ(p->location, "/plain/path");

  auto r = RemoteUrl::Parse("rados://layerfs");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, "rados");
  EXPECT_EQ(r->location, "layerfs");
  EXPECT_EQ(r->prefix, "");
  auto rn = RemoteUrl::Parse("rados://pool.x/team-a/proj/");
  ASSERT_TRUE(rn.ok());
  EXPECT_EQ(rn->location, "pool.x");
  EXPECT_EQ(rn->prefix, "team-a/proj");

  auto s = RemoteUrl::Parse("s3://my-bucket/some/prefix/?endpoint=http://127.0.0.1:7480");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->kind, "s3");
  EXPECT_EQ(s->location, "my-bucket");
  EXPECT_EQ(s->prefix, "some/prefix");
  EXPECT_EQ(s->endpoint, "http://127.0.0.1:7480");
  auto aws = RemoteUrl::Parse("s3://bucket.example?region=eu-west-1");
  ASSERT_TRUE(aws.ok());
  EXPECT_EQ(aws->endpoint, "");
  EXPECT_EQ(aws->region, "eu-west-1");
  EXPECT_EQ(aws->prefix, "");
  auto enc = RemoteUrl::Parse("s3://bkt/p?endpoint=https%3A%2F%2Fs3.local%3A9000%2F");
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  EXPECT_EQ(enc->endpoint, "https://s3.local:9000");
}

TEST(RemoteUrlTest, RefusesMalformedUrls) {
  for (std::string u : {"", "ftp://x", "file://host/path", "file://", "relative/path", "rados://",
                        "rados:///ns", "rados://pool?x=1", "rados://pool/../x", "rados://po ol",
                        "s3://", "s3://ab", "s3://UPPER", "s3://-bad", "s3://b..c", "s3://bkt/a//b",
                        "s3://bkt/../x", "s3://bkt?endpoint=ftp://x", "s3://bkt?endpoint=http://h/path",
                        "s3://bkt?endpoint=", "s3://bkt?color=red", "s3://bkt?region=EU",
                        "s3://bkt?endpoint=http%zz"}) {
    auto r = RemoteUrl::Parse(u);
    EXPECT_FALSE(r.ok()) << u;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), EINVAL) << u;
      EXPECT_NE(r.status().message().find("remote '" + u + "'"), std::string::npos) << r.status().message();
    }
  }
  EXPECT_EQ(OpenTransport("nope://x").status().code(), EINVAL);
}

// Opened for a clone, a directory that is not there is ENOENT and stays absent; otherwise it is
// made (a push makes its remote).
TEST(FileTransportTest, AMissingDirectoryIsMadeUnlessItMustExist) {
  testing::TempDir d;
  const std::string root = d.path() + "/a/b";
  auto missing = OpenTransport("file://" + root, /*existing=*/true);
  EXPECT_EQ(missing.status().code(), ENOENT);
  EXPECT_NE(missing.status().message().find(root), std::string::npos) << missing.status().message();
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/a"));
  auto made = OpenTransport("file://" + root);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_TRUE(std::filesystem::is_directory(root));
  auto there = OpenTransport("file://" + root, /*existing=*/true);
  ASSERT_TRUE(there.ok()) << there.status().message();
  auto keys = (*there)->List("");
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->empty());
}

TEST(FileTransportTest, LayoutKeepsKeysApartFromDirectoriesAndTemporaries) {
  testing::TempDir d;
  auto t = OpenTransport("file://" + d.path() + "/new/remote");  // created on open
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE((*t)->Put("refs/heads/x", "1").ok());
  ASSERT_TRUE((*t)->Put("refs/heads/x/y", "2").ok());
  ASSERT_TRUE((*t)->CasRef("refs/heads/z", "3", std::nullopt).ok());
  std::string root = d.path() + "/new/remote";
  EXPECT_EQ(testing::ReadFileBytes(root + "/refs+/heads+/x"), "1");
  EXPECT_EQ(testing::ReadFileBytes(root + "/refs+/heads+/x+/y"), "2");
  EXPECT_EQ(testing::ReadFileBytes(root + "/refs+/heads+/z"), "3");
  EXPECT_TRUE(std::filesystem::exists(root + "/refs+/heads+/z,lock"));
  // Leftovers of a crash mid-write are never keys.
  testing::WriteFile(root + "/refs+/heads+/x,tmp0123456789abcdef", "partial");
  testing::WriteFile(root + "/stray+file", "not a key");
  auto l = (*t)->List("");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, (std::vector<std::string>{"refs/heads/x", "refs/heads/x/y", "refs/heads/z"}));
  // Writes leave no temporary behind.
  size_t files = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(root)) files += e.is_regular_file();
  EXPECT_EQ(files, 6u);  // 3 keys, 1 lock, 2 planted
}

TEST(FileTransportTest, SymlinksInTheRemoteNeverLeadOutside) {
  testing::TempDir d;
  std::string root = d.path() + "/remote", outside = d.path() + "/outside";
  std::filesystem::create_directories(root);
  std::filesystem::create_directories(outside);
  testing::WriteFile(outside + "/secret", "secret");
  std::filesystem::create_directory_symlink(outside, root + "/evil+");
  std::filesystem::create_symlink(outside + "/secret", root + "/link");
  auto t = OpenTransport("file://" + root);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Get("evil/secret").status().code(), EIO);
  EXPECT_EQ((*t)->Put("evil/planted", "x").code(), EIO);
  EXPECT_EQ((*t)->Get("link").status().code(), EIO);
  EXPECT_EQ((*t)->Size("link").status().code(), EIO);
  EXPECT_FALSE(std::filesystem::exists(outside + "/planted"));
  auto l = (*t)->List("");
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->empty());  // neither the link nor the linked directory is listed
  EXPECT_EQ(testing::ReadFileBytes(outside + "/secret"), "secret");
}

TEST(FileTransportTest, ProcessesRacingOnARefCountExactly) {
  testing::TempDir d;
  std::string url = "file://" + d.path() + "/remote";
  constexpr int kProcs = 4, kEach = 40;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; p++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto t = OpenTransport(url);
      if (!t.ok()) _exit(2);
      for (int n = 0; n < kEach;) {
        auto cur = (*t)->GetRef("refs/heads/main");
        if (!cur.ok()) _exit(3);
        int v = cur->has_value() ? std::stoi((*cur)->value) : 0;
        std::optional<std::string> tok;
        if (cur->has_value()) tok = (*cur)->token;
        auto r = (*t)->CasRef("refs/heads/main", std::to_string(v + 1), tok);
        if (r.ok()) n++;
        else if (r.status().code() != ESTALE) _exit(4);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  }
  auto t = OpenTransport(url);
  ASSERT_TRUE(t.ok());
  auto end = (*t)->GetRef("refs/heads/main");
  ASSERT_TRUE(end.ok() && end->has_value());
  EXPECT_EQ((*end)->value, std::to_string(kProcs * kEach));
}

TEST(FaultTransportTest, FailsAfterNCallsOfTheChosenOps) {
  auto mem = NewMemTransport();
  FaultTransport f(mem.get());
  f.FailAfter(2, ETIMEDOUT, FaultTransport::kBlobWrites);
  EXPECT_TRUE(f.Put("a", "1").ok());
  EXPECT_TRUE(f.Get("a").ok());  // reads are not counted against the writes
  EXPECT_TRUE(f.PutIfAbsent("b", "2").ok());
  Status s = f.Put("c", "3");
  EXPECT_EQ(s.code(), ETIMEDOUT);
  EXPECT_NE(s.message().find("'c'"), std::string::npos) << s.message();
  EXPECT_EQ(f.Put("d", "4").code(), ETIMEDOUT);
  EXPECT_EQ(mem->Get("c").status().code(), ENOENT);  // a failed call never reached the backend
  EXPECT_TRUE(f.CasRef("r", "x", std::nullopt).ok());
  f.Disarm();
  EXPECT_TRUE(f.Put("c", "3").ok());
  f.FailPuts();
  EXPECT_EQ(f.Put("e", "5").code(), ENOSPC);
  EXPECT_TRUE(f.Get("c").ok());
  EXPECT_EQ(f.calls(FaultTransport::kPut), 5u);
  EXPECT_EQ(f.bytes_written(), 3u);  // "1", "2", "3": refused calls and refs are not counted
}

TEST(FaultTransportTest, DamagesAndTruncatesReads) {
  auto mem = NewMemTransport();
  FaultTransport f(mem.get());
  ASSERT_TRUE(f.Put("packs/p", "0123456789").ok());
  ASSERT_TRUE(f.Put("other", "abcdef").ok());
  f.SetDamage(FaultTransport::Damage::kFlip, "packs/");
  auto g = f.Get("packs/p");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->size(), 10u);
  EXPECT_NE(*g, "0123456789");
  EXPECT_EQ(*f.Get("other"), "abcdef");
  f.SetDamage(FaultTransport::Damage::kTruncate);
  std::vector<RangeRead> r(1);
  r[0] = {.key = "other", .offset = 0, .length = 6};
  ASSERT_TRUE(f.ReadRanges(&r).ok());
  EXPECT_EQ(r[0].data, "abc");
  f.SetDamage(FaultTransport::Damage::kNone);
  EXPECT_EQ(*f.Get("packs/p"), "0123456789");
  EXPECT_EQ(*mem->Get("packs/p"), "0123456789");  // the backend's bytes were never touched
}

TEST(FaultTransportTest, HookMovesARefUnderneath) {
  auto mem = NewMemTransport();
  FaultTransport f(mem.get());
  auto tok = f.CasRef("refs/heads/main", "A", std::nullopt);
  ASSERT_TRUE(tok.ok());
  int fired = 0;
  f.SetHook(FaultTransport::kCasRef, [&](FaultTransport::Op, std::string_view key) {
    if (fired++ == 0) {
      ASSERT_TRUE(mem->Put(key, "moved by another host").ok());
    }
  });
  auto r = f.CasRef("refs/heads/main", "B", *tok);
  EXPECT_EQ(r.status().code(), ESTALE);
  EXPECT_EQ(*f.Get("refs/heads/main"), "moved by another host");
  auto cur = f.GetRef("refs/heads/main");
  ASSERT_TRUE(cur.ok() && cur->has_value());
  EXPECT_TRUE(f.CasRef("refs/heads/main", "B", (*cur)->token).ok());
  EXPECT_EQ(fired, 2);
  f.SetHook(0, nullptr);
  EXPECT_EQ(f.calls(FaultTransport::kCasRef), 3u);
}

}  // namespace
}  // namespace layerfs::remote
