// Random operation sequences run through a real mount with plain syscalls, checked against an
// in-memory model after every operation; every few dozen operations the Workspace commits, and at
// the end each Commit is checked against the model as it was then, through the Store.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mount_env.h"
#include "syscall_log.h"

namespace layerfs::itest {
namespace {

struct Node {
  enum Kind { kFile, kDir, kSymlink } kind = kFile;
  std::string data;  // file content or symlink target
};
using Model = std::map<std::string, Node>;

std::string ParentOf(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? std::string() : p.substr(0, s);
}
bool IsBelow(const std::string& p, const std::string& dir) {
  return p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/';
}
bool HasChildren(const Model& m, const std::string& dir) {
  auto it = m.upper_bound(dir);
  return it != m.end() && IsBelow(it->first, dir);
}
std::set<std::string> ChildrenOf(const Model& m, const std::string& dir) {
  std::set<std::string> out;
  for (const auto& [p, n] : m)
    if (ParentOf(p) == dir) out.insert(p.substr(dir.empty() ? 0 : dir.size() + 1));
  return out;
}


bool PwriteAll(int fd, const std::string& d, off_t off) {
  size_t done = 0;
  while (done < d.size()) {
    ssize_t n = pwrite(fd, d.data() + done, d.size() - done, off + done);
    if (n <= 0) return false;
    done += n;
  }
  return true;
}

// Every path of a committed tree with its entry type.
::testing::AssertionResult WalkTree(Store& store, const ObjectId& tree, const std::string& prefix,
                                    std::map<std::string, EntryType>* out) {
  auto entries = store.ReadTree(tree);
  if (!entries.ok()) return ::testing::AssertionFailure() << "ReadTree " << prefix << ": " << entries.status().ToString();
  for (const auto& e : *entries) {
    std::string p = prefix.empty() ? e.name : prefix + "/" + e.name;
    (*out)[p] = e.type;
    if (e.type == EntryType::kDir) {
      auto r = WalkTree(store, e.id, p, out);
      if (!r) return r;
    }
  }
  return ::testing::AssertionSuccess();
}

class Runner {
 public:
  Runner(MountEnv& env, uint32_t seed) : env_(env), seed_(seed), rng_(seed) {}

  void Run(int ops) {
    for (op_ = 0; op_ < ops; ++op_) {
      Step();
      if (::testing::Test::HasFatalFailure() || failed_) return;
      ReadBack();
      if (::testing::Test::HasFatalFailure() || failed_) return;
      if ((op_ + 1) % 50 == 0) {
        CommitNow();
        if (::testing::Test::HasFatalFailure() || failed_) return;
      }
    }
    CommitNow();
  }

  void CheckCommits() {
    Store& store = env_.store();
    for (size_t i = 0; i < commits_.size(); ++i) {
      const auto& [id, m] = commits_[i];
      SCOPED_TRACE("seed " + std::to_string(seed_) + " commit #" + std::to_string(i) + " " + id.Hex());
      for (const auto& [p, n] : m) {
        auto e = store.Lookup(id, p);
        ASSERT_TRUE(e.ok()) << p << ": " << e.status().ToString();
        switch (n.kind) {
          case Node::kFile: {
            ASSERT_EQ(e->type, EntryType::kFile) << p;
            ASSERT_EQ(e->size, n.data.size()) << p;
            auto d = store.ReadFile(*e);
            ASSERT_TRUE(d.ok()) << p << ": " << d.status().ToString();
            ASSERT_TRUE(*d == n.data) << p << ": size " << d->size() << " vs model " << n.data.size()
                                      << ", first difference at " << FirstDiff(*d, n.data);
            break;
          }
          case Node::kDir: ASSERT_EQ(e->type, EntryType::kDir) << p; break;
          case Node::kSymlink:
            ASSERT_EQ(e->type, EntryType::kSymlink) << p;
            ASSERT_EQ(e->target, n.data) << p;
            break;
        }
      }
      auto info = store.GetCommit(id);
      ASSERT_TRUE(info.ok()) << info.status().ToString();
      std::map<std::string, EntryType> tree;
      ASSERT_TRUE(WalkTree(store, info->root, "", &tree));
      std::set<std::string> want, got;
      for (const auto& [p, n] : m) want.insert(p);
      for (const auto& [p, t] : tree) got.insert(p);
      ASSERT_EQ(got, want);
      ASSERT_EQ(info->files, m.size());
    }
    auto rep = store.Verify({});
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    ASSERT_TRUE(rep->ok()) << rep->problems[0];
  }

 private:
  static size_t FirstDiff(const std::string& a, const std::string& b) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return i;
  }

  std::string Abs(const std::string& p) const { return p.empty() ? env_.mnt() : env_.mnt() + "/" + p; }
  std::string Where() const {
    return "seed " + std::to_string(seed_) + " op " + std::to_string(op_) + ": " + last_;
  }

  // A random node of the given kinds ("" when there is none).
  std::string Pick(std::initializer_list<Node::Kind> kinds) {
    std::vector<std::string> c;
    for (const auto& [p, n] : model_)
      for (auto k : kinds)
        if (n.kind == k) c.push_back(p);
    if (c.empty()) return "";
    return c[rng_() % c.size()];
  }
  // A random directory ("" = root, two times in five).
  std::string PickDir() {
    if (rng_() % 5 < 2) return "";
    return Pick({Node::kDir});
  }
  std::string NewPath() {
    std::string d = PickDir();
    std::string name = "n" + std::to_string(rng_() % 10);
    return d.empty() ? name : d + "/" + name;
  }
  std::string Data(size_t n) {
    std::string s(n, '\0');
    char c = static_cast<char>('a' + rng_() % 26);
    for (size_t i = 0; i < n; ++i) {
      if (i % 997 == 0) c = static_cast<char>('a' + rng_() % 26);
      s[i] = static_cast<char>(c + (i % 7));
    }
    return s;
  }

  // Checks a syscall's result against the model's expectation (0 = success).
  void Expect(int rc, int want_errno, const char* what) {
    int got = rc < 0 ? errno : 0;
    if (got != want_errno) {
      ADD_FAILURE() << Where() << " " << what << ": expected " << (want_errno ? strerror(want_errno) : "success")
                    << ", got " << (got ? strerror(got) : "success");
      failed_ = true;
    }
  }
  int ExpectedCreate(const std::string& p) {
    std::string par = ParentOf(p);
    if (!par.empty() && !model_.count(par)) return ENOENT;
    return 0;
  }

  void Step() {
    int kind = rng_() % 20;
    std::ostringstream d;
    if (kind <= 3) {  // create or replace a file: open(O_CREAT|O_TRUNC) + pwrite
      std::string p = NewPath();
      if (rng_() % 30 == 0) p = "nx/" + p;  // a parent that does not exist
      auto it = model_.find(p);
      if (it != model_.end() && it->second.kind == Node::kSymlink) return;  // would follow it
      bool excl = rng_() % 4 == 0;
      std::string data = Data(rng_() % 200001);
      d << "create " << p << (excl ? " O_EXCL" : "") << " " << data.size() << " bytes";
      last_ = d.str();
      int want = ExpectedCreate(p);
      if (!want && it != model_.end()) want = excl ? EEXIST : (it->second.kind == Node::kDir ? EISDIR : 0);
      int fd = open(Abs(p).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (excl ? O_EXCL : O_TRUNC), 0644);
      Expect(fd, want, "open");
      if (fd < 0) return;
      model_[p] = Node{Node::kFile, ""};
      if (!PwriteAll(fd, data, 0)) { ADD_FAILURE() << Where() << " pwrite: " << strerror(errno); failed_ = true; }
      Expect(close(fd), 0, "close");
      model_[p].data = data;
    } else if (kind <= 6) {  // overwrite part of a file, possibly extending it
      std::string p = Pick({Node::kFile});
      if (p.empty()) return;
      std::string& m = model_[p].data;
      uint64_t off = rng_() % (std::min<size_t>(m.size(), 200000) + 5000);
      std::string data = Data(1 + rng_() % 60000);
      d << "pwrite " << p << " off " << off << " len " << data.size() << " (size " << m.size() << ")";
      last_ = d.str();
      int fd = open(Abs(p).c_str(), O_WRONLY | O_CLOEXEC);
      Expect(fd, 0, "open");
      if (fd < 0) return;
      if (!PwriteAll(fd, data, off)) { ADD_FAILURE() << Where() << " pwrite: " << strerror(errno); failed_ = true; }
      Expect(close(fd), 0, "close");
      if (m.size() < off + data.size()) m.resize(off + data.size(), '\0');
      m.replace(off, data.size(), data);
    } else if (kind <= 8) {  // ftruncate shorter or longer
      std::string p = Pick({Node::kFile});
      if (p.empty()) return;
      std::string& m = model_[p].data;
      uint64_t n = rng_() % 3 ? rng_() % (m.size() + 1) : rng_() % 200001;
      d << "ftruncate " << p << " " << m.size() << " -> " << n;
      last_ = d.str();
      int fd = open(Abs(p).c_str(), O_WRONLY | O_CLOEXEC);
      Expect(fd, 0, "open");
      if (fd < 0) return;
      Expect(ftruncate(fd, n), 0, "ftruncate");
      Expect(close(fd), 0, "close");
      m.resize(n, '\0');
    } else if (kind <= 10) {  // unlink a file or symlink, sometimes a missing one
      std::string p = rng_() % 8 ? Pick({Node::kFile, Node::kSymlink}) : NewPath();
      if (p.empty()) return;
      auto it = model_.find(p);
      int want = it == model_.end() ? ENOENT : it->second.kind == Node::kDir ? EISDIR : 0;
      last_ = "unlink " + p;
      Expect(unlink(Abs(p).c_str()), want, "unlink");
      if (!want) model_.erase(p);
    } else if (kind <= 12) {  // mkdir
      std::string p = NewPath();
      int want = ExpectedCreate(p);
      if (!want && model_.count(p)) want = EEXIST;
      last_ = "mkdir " + p;
      Expect(mkdir(Abs(p).c_str(), 0755), want, "mkdir");
      if (!want) model_[p] = Node{Node::kDir, ""};
    } else if (kind == 13) {  // rmdir, often of a non-empty directory
      std::string p = rng_() % 8 ? Pick({Node::kDir}) : NewPath();
      if (p.empty()) return;
      auto it = model_.find(p);
      int want = it == model_.end() ? ENOENT : it->second.kind != Node::kDir ? ENOTDIR
                                                : HasChildren(model_, p) ? ENOTEMPTY : 0;
      last_ = "rmdir " + p;
      Expect(rmdir(Abs(p).c_str()), want, "rmdir");
      if (!want) model_.erase(p);
    } else if (kind == 14) {  // symlink
      std::string p = NewPath();
      std::string target = rng_() % 2 ? "t" + std::to_string(rng_() % 1000) : "../" + Pick({Node::kFile});
      int want = ExpectedCreate(p);
      if (!want && model_.count(p)) want = EEXIST;
      last_ = "symlink " + target + " " + p;
      Expect(symlink(target.c_str(), Abs(p).c_str()), want, "symlink");
      if (!want) model_[p] = Node{Node::kSymlink, target};
    } else {  // rename anything to a random path
      std::string src = rng_() % 4 ? Pick({Node::kFile, Node::kSymlink}) : Pick({Node::kDir});
      if (src.empty()) return;
      std::string dst = NewPath();
      bool src_dir = model_[src].kind == Node::kDir;
      auto dit = model_.find(dst);
      int want = 0;
      std::vector<int> alt;
      if (src == dst) want = 0;
      else if (src_dir && IsBelow(dst, src)) want = EINVAL;
      else if (IsBelow(src, dst)) want = ENOTEMPTY;  // the target is an ancestor of the source
      else if (dit != model_.end()) {
        bool dst_dir = dit->second.kind == Node::kDir;
        if (!src_dir && dst_dir) want = EISDIR;
        else if (src_dir && !dst_dir) want = ENOTDIR;
        else if (dst_dir && HasChildren(model_, dst)) { want = ENOTEMPTY; alt.push_back(EEXIST); }
      }
      last_ = "rename " + src + " -> " + dst;
      int rc = rename(Abs(src).c_str(), Abs(dst).c_str());
      int got = rc < 0 ? errno : 0;
      if (got != want && std::find(alt.begin(), alt.end(), got) == alt.end()) Expect(rc, want, "rename");
      if (rc < 0 || src == dst) return;
      if (dit != model_.end()) model_.erase(dit);
      std::vector<std::pair<std::string, Node>> moved;
      for (auto it = model_.begin(); it != model_.end();) {
        if (it->first == src || IsBelow(it->first, src)) {
          moved.emplace_back(dst + it->first.substr(src.size()), std::move(it->second));
          it = model_.erase(it);
        } else {
          ++it;
        }
      }
      for (auto& [p, n] : moved) model_[p] = std::move(n);
    }
  }

  // Reads one random node back through the mount, and lists one random directory.
  void ReadBack() {
    if (model_.empty()) return;
    auto it = model_.begin();
    std::advance(it, rng_() % model_.size());
    const auto& [p, n] = *it;
    struct stat st;
    if (lstat(Abs(p).c_str(), &st) != 0) {
      ADD_FAILURE() << Where() << " | lstat " << p << ": " << strerror(errno);
      failed_ = true;
      return;
    }
    if (n.kind == Node::kFile) {
      int err;
      std::string got = ReadWholeFile(Abs(p), &err);
      if (err || !S_ISREG(st.st_mode) || got != n.data || static_cast<size_t>(st.st_size) != n.data.size()) {
        ADD_FAILURE() << Where() << " | read back " << p << ": expected " << n.data.size() << " bytes, got "
                      << (err ? strerror(err) : std::to_string(got.size()) + " bytes") << " (st_size "
                      << st.st_size << ", first difference at " << FirstDiff(got, n.data) << ")";
        failed_ = true;
      }
    } else if (n.kind == Node::kSymlink) {
      char buf[4096];
      ssize_t len = readlink(Abs(p).c_str(), buf, sizeof buf);
      if (!S_ISLNK(st.st_mode) || len < 0 || std::string(buf, len) != n.data) {
        ADD_FAILURE() << Where() << " | readlink " << p << ": expected " << n.data;
        failed_ = true;
      }
    } else if (!S_ISDIR(st.st_mode)) {
      ADD_FAILURE() << Where() << " | " << p << " is not a directory";
      failed_ = true;
    }
    std::string dir = rng_() % 3 == 0 ? "" : Pick({Node::kDir});
    DIR* dp = opendir(Abs(dir).c_str());
    if (!dp) {
      ADD_FAILURE() << Where() << " | opendir " << dir << ": " << strerror(errno);
      failed_ = true;
      return;
    }
    std::set<std::string> names;
    while (auto* e = readdir(dp))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names.insert(e->d_name);
    closedir(dp);
    auto want = ChildrenOf(model_, dir);
    if (names != want) {
      std::ostringstream s;
      for (auto& x : names) s << x << " ";
      s << "| model: ";
      for (auto& x : want) s << x << " ";
      ADD_FAILURE() << Where() << " | readdir '" << dir << "': " << s.str();
      failed_ = true;
    }
  }

  void CommitNow() {
    int fd = open(env_.mnt().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(syncfs(fd), 0) << strerror(errno);
    close(fd);
    auto c = env_.ws().Commit("random op " + std::to_string(op_));
    ASSERT_TRUE(c.ok()) << "seed " << seed_ << " op " << op_ << " Commit: " << c.status().ToString();
    commits_.emplace_back(*c, model_);
  }

  MountEnv& env_;
  uint32_t seed_;
  std::mt19937 rng_;
  Model model_;
  std::vector<std::pair<ObjectId, Model>> commits_;
  int op_ = 0;
  std::string last_;
  bool failed_ = false;
};

TEST(RandomOpsTest, RandomOperationsThroughMountAgainstModel) {
  for (uint32_t seed : {11u, 22u, 33u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    MountEnv env;
    ASSERT_TRUE(env.ok());
    ASSERT_TRUE(env.Mount());
    Runner r(env, seed);
    r.Run(800);
    if (::testing::Test::HasFailure()) return;
    r.CheckCommits();
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace layerfs::itest
