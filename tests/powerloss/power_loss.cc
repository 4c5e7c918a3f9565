// layerfs_power_loss: cuts the power under a Store at seeded random points of a workload and
// checks what survives (docs/reliability.md, "Power loss").
//
// The Store runs in this process over kv::PowerLoss (src/kv/power_loss.h), which records which
// bytes and names of its files (RocksDB's and the data log's) were made durable. Each crash
// point is one epoch: open the Store over a fresh layer (that open is the recovery of the last
// cut, and the cut may fall inside it), check the state against the model, run a random
// workload through the Workspace API that the FUSE adapter calls (creates, writes of small
// pieces and of whole 64 KiB blocks that go to the data log, truncates, renames, unlinks,
// fsyncs, commits, forks, gc, with the background encoder running) until the power goes off at
// the chosen call, close everything, and drop what was not durable (every unsynced byte and
// name, or a random part of them). The checks, after every cut:
//  - every Commit that Commit() reported is there with exactly the files it had, every fork
//    reported is there at its Commit, main's head is the last reported Commit (or the one whose
//    commit the cut interrupted), and `verify` over all of them is clean;
//  - the Workspace is exactly the model's state after some operation at or after the last one a
//    reported fsync or commit covered: every fsync'ed byte is there, and each operation since is
//    all there or not at all (no file half written, no garbage, no unreadable block).
//
// Usage: layerfs_power_loss [--points N] [--seed S] [--soak [N]] [--dir D] [--mode M] [-v]
// --soak runs N points (default 3000; LAYERFS_POWER_LOSS_SOAK=N does the same, 1 meaning 3000),
// the long run; ctest runs a few dozen (tests/CMakeLists.txt). Exit 1 on the first failure, with
// the seed and point to rerun it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kv/power_loss.h"
#include "layerfs/store.h"
#include "workspace/workspace.h"

namespace fs = std::filesystem;
using namespace layerfs;
using workspace::Workspace;

namespace {

using Content = std::shared_ptr<const std::string>;
using State = std::map<std::string, Content>;  // file name in the Workspace root -> bytes

struct Options {
  int points = 300;
  uint64_t seed = 0;
  bool soak = false;
  bool verbose = false;
  int mode = 2;  // 0 drop-all, 1 random, 2 both
  std::string dir;
  int epochs_per_store = 25;  // a fresh Store after this many points (history stays small)
  int ops_per_epoch = 30;
};

struct Figures {
  int points = 0, cut_in_open = 0, cut_in_workload = 0, cut_at_end = 0, drop_all = 0, random = 0;
  uint64_t bytes_dropped = 0, bytes_kept = 0, files_cut = 0, names_undone = 0, names_kept = 0;
  uint64_t ops = 0, fsyncs = 0, commits = 0, forks = 0, gcs = 0, block_writes = 0;
  uint64_t commits_checked = 0, verify_objects = 0, stores = 0;
  uint64_t matched_last = 0, matched_inflight = 0, matched_older = 0;  // which state came back
  uint64_t lost_synced_bytes = 0, lost_commits = 0;                   // must stay 0
};

std::string g_cleanup;  // the scratch directory to remove on exit, failure included

[[noreturn]] void Fail(const std::string& what) {
  std::fflush(stdout);
  fmt::print(stderr, "layerfs_power_loss: FAIL: {}\n", what);
  std::fflush(stderr);
  if (!g_cleanup.empty()) {
    std::error_code ec;
    fs::remove_all(g_cleanup, ec);
  }
  std::_Exit(1);
}

template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Fail(what + ": " + r.status().ToString());
  return std::move(*r);
}

std::string Describe(const State& s) {
  std::string out;
  for (auto& [n, c] : s) out += fmt::format("{}:{} ", n, c->size());
  return out.empty() ? "(empty)" : out;
}

// What the model expects of a Store after a cut.
struct Model {
  // Workspace states: [0] is what the last recovery showed; states[i] after the i-th operation.
  std::vector<State> states;
  size_t synced = 0;             // states before this index may not come back (fsync, commit)
  std::optional<State> inflight;  // the operation the cut interrupted, had it completed
  bool inflight_commit = false;
  std::optional<std::string> inflight_fork;
  struct Committed {
    ObjectId id;
    State state;
  };
  std::vector<Committed> commits;          // reported, oldest first
  std::map<std::string, ObjectId> forks;   // reported
  ObjectId head;                           // main's last reported head
};

// ---- Reading what came back ----

Result<State> ReadWorkspace(Workspace& ws) {
  State st;
  LFS_ASSIGN(auto entries, ws.ReadDir(workspace::kRootIno));
  for (auto& e : entries) {
    if (e.name == "." || e.name == "..") continue;
    if (!S_ISREG(e.mode)) return Status::Corrupt("unexpected entry " + e.name);
    LFS_ASSIGN(auto a, ws.GetAttr(e.ino));
    std::string data;
    while (data.size() < a.size) {
      // ReadPieces: what the FUSE adapter serves (data-log blocks as file ranges).
      LFS_ASSIGN(auto rep, ws.ReadPieces(e.ino, data.size(), std::min<uint64_t>(a.size - data.size(), 1 << 20)));
      if (rep.size == 0) return Status::Corrupt(e.name + ": short read");
      for (auto& p : rep.pieces) {
        if (p.fd < 0) {
          data += p.bytes;
          continue;
        }
        std::string buf(p.length, '\0');
        ssize_t n = ::pread(p.fd, buf.data(), p.length, static_cast<off_t>(p.offset));
        if (n != static_cast<ssize_t>(p.length)) return Status::Errorf(EIO, "{}: short read of a data-log range", e.name);
        data += buf;
      }
    }
    st[e.name] = std::make_shared<const std::string>(std::move(data));
  }
  return st;
}

Result<State> ReadCommit(Store& store, const ObjectId& id) {
  LFS_ASSIGN(auto c, store.GetCommit(id));
  LFS_ASSIGN(auto entries, store.ReadTree(c.root));
  State st;
  for (auto& e : entries) {
    LFS_ASSIGN(auto data, store.ReadFile(e));
    st[e.name] = std::make_shared<const std::string>(std::move(data));
  }
  return st;
}

bool Same(const State& a, const State& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
    if (ia->first != ib->first || *ia->second != *ib->second) return false;
  return true;
}

// Bytes of `want` that `got` lacks or has wrong (for the figures of a failure).
uint64_t Missing(const State& want, const State& got) {
  uint64_t n = 0;
  for (auto& [name, c] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      n += c->size();
      continue;
    }
    for (size_t i = 0; i < c->size(); i++) n += i >= it->second->size() || (*it->second)[i] != (*c)[i];
  }
  return n;
}

// Checks a Store just reopened after a cut against the model; on success the model's base is
// the state that came back.
// Returns false if the power went off during the check (it reads, and reads may write: a
// directory materialised); the next recovery is then checked instead.
#define CHECK_TRY(expr, what)                                  \
  ({                                                          \
    auto _r = (expr);                                         \
    if (!_r.ok()) {                                           \
      if (power_off()) return false;                          \
      Fail(std::string(what) + ": " + _r.status().ToString()); \
    }                                                         \
    std::move(*_r);                                           \
  })
bool Check(Store& store, Workspace& ws, Model& m, Figures& f, const std::string& where,
           const std::function<bool()>& power_off) {
  // Commits, forks, heads.
  for (auto& c : m.commits) {
    auto got = ReadCommit(store, c.id);
    if (!got.ok()) {
      if (power_off()) return false;
      f.lost_commits++;
      Fail(fmt::format("{}: reported Commit {} unreadable: {}", where, c.id.Hex(), got.status().ToString()));
    }
    if (!Same(*got, c.state)) {
      f.lost_commits++;
      Fail(fmt::format("{}: reported Commit {} differs: has {} wants {}", where, c.id.Hex(), Describe(*got),
                       Describe(c.state)));
    }
    f.commits_checked++;
  }
  auto head = CHECK_TRY(store.BranchHead("main"), where + ": main's head");
  if (!head) Fail(where + ": branch main is gone");
  const State* head_state = nullptr;
  if (*head != m.head) {
    // Only the Commit the cut interrupted may have landed: its parent is the last head.
    if (!m.inflight_commit)
      Fail(fmt::format("{}: main is at {}, the last reported Commit is {}", where, head->Hex(), m.head.Hex()));
    auto c = CHECK_TRY(store.GetCommit(*head), where + ": unreported head");
    if (c.parents.size() != 1 || c.parents[0] != m.head)
      Fail(fmt::format("{}: main is at {} whose parent is not the last reported Commit", where, head->Hex()));
    auto got = CHECK_TRY(ReadCommit(store, *head), where + ": unreported head's files");
    if (!Same(got, m.states.back()))
      Fail(fmt::format("{}: the interrupted Commit holds {} wants {}", where, Describe(got), Describe(m.states.back())));
    m.commits.push_back({*head, got});
    m.head = *head;
    head_state = &m.commits.back().state;
  }
  (void)head_state;
  for (auto& [name, id] : m.forks) {
    auto h = CHECK_TRY(store.BranchHead(name), where + ": fork " + name);
    if (!h || *h != id) Fail(fmt::format("{}: reported fork {} is {}", where, name, h ? h->Hex() : "gone"));
  }
  if (m.inflight_fork) {
    auto h = CHECK_TRY(store.BranchHead(*m.inflight_fork), where + ": interrupted fork");
    if (h) {
      if (*h != m.head) Fail(fmt::format("{}: interrupted fork {} is at {}", where, *m.inflight_fork, h->Hex()));
      m.forks[*m.inflight_fork] = *h;
    }
  }
  std::vector<ObjectId> ids;
  for (auto& c : m.commits) ids.push_back(c.id);
  ids.push_back(m.head);
  auto rep = CHECK_TRY(store.Verify(ids), where + ": verify");
  if (!rep.ok()) Fail(fmt::format("{}: verify: {}", where, rep.problems.front()));
  f.verify_objects += rep.objects;

  // The Workspace.
  auto got = ReadWorkspace(ws);
  if (!got.ok() && power_off()) return false;
  if (!got.ok()) Fail(fmt::format("{}: Workspace unreadable: {}", where, got.status().ToString()));
  std::optional<size_t> match;
  for (size_t i = m.states.size(); i-- > m.synced;)
    if (Same(*got, m.states[i])) {
      match = i;
      break;
    }
  if (!match && m.inflight && Same(*got, *m.inflight)) {
    f.matched_inflight++;
  } else if (match) {
    (*match + 1 == m.states.size() ? f.matched_last : f.matched_older)++;
  } else {
    uint64_t lost = Missing(m.states[m.synced], *got);
    f.lost_synced_bytes += lost;
    std::string why = fmt::format("{}: the Workspace came back as no state since the last fsync ({} of {} states)\n"
                                  "  got:        {}\n  fsync'ed:   {}\n  last:       {}\n",
                                  where, m.states.size() - m.synced, m.states.size(), Describe(*got),
                                  Describe(m.states[m.synced]), Describe(m.states.back()));
    if (m.inflight) why += "  interrupted: " + Describe(*m.inflight) + "\n";
    why += fmt::format("  bytes of the fsync'ed state missing or wrong: {}", lost);
    for (auto& [name, c] : *got) {
      auto it = m.states.back().find(name);
      if (it == m.states.back().end()) continue;
      size_t first = 0;
      while (first < c->size() && first < it->second->size() && (*c)[first] == (*it->second)[first]) first++;
      if (first < std::max(c->size(), it->second->size()))
        why += fmt::format("\n  {}: first difference from the last state at byte {} (block {})", name, first,
                           first / workspace::kBlockSize);
    }
    Fail(why);
  }
  m.states = {*got};
  m.synced = 0;
  m.inflight.reset();
  m.inflight_commit = false;
  m.inflight_fork.reset();
  return true;
}

// ---- The workload ----

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(s.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return s;
}

std::string Written(const std::string& old, uint64_t off, const std::string& data) {
  std::string s = old;
  if (s.size() < off + data.size()) s.resize(off + data.size(), '\0');
  std::memcpy(s.data() + off, data.data(), data.size());
  return s;
}

// Runs one operation; false once the power is off (the operation failed).
// Runs one operation. False once the power is off: the operation that saw the cut may or may
// not have reached the disk (the model keeps its result as the interrupted state).
bool RunOp(Store& store, Workspace& ws, Model& m, Figures& f, std::mt19937_64& rng, int& fork_seq,
           const std::function<bool()>& power_off) {
  static const char* kNames[] = {"a", "b", "c", "d", "e", "f"};
  const State& cur = m.states.back();
  State next = cur;
  std::string name = kNames[rng() % 6];
  unsigned pick = rng() % 100;
  auto lookup = [&](const std::string& n) -> Result<workspace::Attr> { return ws.Lookup(workspace::kRootIno, n); };
  auto done = [&](Status s, State next_state, bool syncs) -> bool {
    if (!s.ok() && !power_off()) Fail("an operation failed with the power on: " + s.ToString());
    if (power_off()) {
      m.inflight = std::move(next_state);
      return false;
    }
    m.states.push_back(std::move(next_state));
    if (syncs) m.synced = m.states.size() - 1;
    f.ops++;
    return true;
  };
  if (pick < 40) {  // write (creating the file first if it is not there)
    if (!cur.count(name)) {
      next[name] = std::make_shared<const std::string>();
      auto a = ws.Mknod(workspace::kRootIno, name, S_IFREG | 0644, 0, {});
      return done(a.status(), next, false);
    }
    auto a = lookup(name);
    if (!a.ok()) return done(a.status(), next, false);
    uint64_t off;
    size_t len;
    if (rng() % 2) {  // whole blocks: the data log
      off = (rng() % 4) * workspace::kBlockSize;
      len = (1 + rng() % 3) * workspace::kBlockSize;
      f.block_writes++;
    } else {
      off = rng() % (cur.at(name)->size() + 4096);
      len = 1 + rng() % 5000;
    }
    std::string data = RandomBytes(rng, len);
    next[name] = std::make_shared<const std::string>(Written(*cur.at(name), off, data));
    auto w = ws.Write(a->ino, off, data);
    if (w.ok() && *w != len) Fail("short write");
    return done(w.status(), next, false);
  }
  if (pick < 48) {  // truncate
    if (!cur.count(name)) return true;
    auto a = lookup(name);
    if (!a.ok()) return done(a.status(), next, false);
    uint64_t size = rng() % (cur.at(name)->size() + 70000);
    std::string s = *cur.at(name);
    s.resize(size, '\0');
    next[name] = std::make_shared<const std::string>(std::move(s));
    workspace::AttrChange ch;
    ch.size = size;
    return done(ws.SetAttr(a->ino, ch).status(), next, false);
  }
  if (pick < 53) {  // unlink
    if (!cur.count(name)) return true;
    auto a = lookup(name);
    if (!a.ok()) return done(a.status(), next, false);
    next.erase(name);
    Status s = ws.Unlink(workspace::kRootIno, name);
    if (s.ok()) ws.Forget(a->ino);
    return done(s, next, false);
  }
  if (pick < 61) {  // rename, over an existing file or not
    std::string to = kNames[rng() % 6];
    if (!cur.count(name) || to == name) return true;
    std::optional<workspace::Ino> replaced;
    if (cur.count(to)) {
      auto b = lookup(to);
      if (!b.ok()) return done(b.status(), next, false);
      replaced = b->ino;
    }
    next[to] = cur.at(name);
    next.erase(name);
    Status s = ws.Rename(workspace::kRootIno, name, workspace::kRootIno, to, 0);
    if (s.ok() && replaced) ws.Forget(*replaced);
    return done(s, next, false);
  }
  if (pick < 75) {  // fsync (of whichever file: it syncs the Workspace)
    if (!cur.count(name)) return true;
    auto a = lookup(name);
    if (!a.ok()) return done(a.status(), next, false);
    f.fsyncs++;
    return done(ws.Fsync(a->ino, rng() % 2), next, true);
  }
  if (pick < 88) {  // commit
    m.inflight_commit = true;
    auto c = ws.Commit(fmt::format("commit {}", f.commits));
    if (!c.ok() || power_off()) return done(c.status(), next, false);
    m.inflight_commit = false;
    m.commits.push_back({*c, cur});
    m.head = *c;
    f.commits++;
    return done(Status::Ok(), next, true);
  }
  if (pick < 95) {  // fork main's head
    std::string fork = fmt::format("fork{}", fork_seq++);
    m.inflight_fork = fork;
    Status s = store.Fork(fork, "main");
    if (!s.ok() || power_off()) return done(s, next, false);
    m.inflight_fork.reset();
    m.forks[fork] = m.head;
    f.forks++;
    return done(s, next, false);
  }
  // gc, keeping what merges in progress need (as the gc verb does)
  auto roots = workspace::MergeRoots(store);
  if (!roots.ok()) return done(roots.status(), next, false);
  f.gcs++;
  return done(store.Gc(*roots).status(), next, false);
}

int Run(const Options& o) {
  Figures f;
  std::mt19937_64 rng(o.seed);
  const std::string store_dir = o.dir + "/store", shadow_dir = o.dir + "/shadow";
  uint64_t est_ops = 400;  // calls on files per epoch, learnt from epochs the cut did not end
  auto t0 = std::chrono::steady_clock::now();
  int point = 0;
  while (point < o.points) {
    // A fresh Store.
    std::error_code ec;
    fs::remove_all(store_dir, ec);
    {
      auto st = Must(Store::Create(store_dir, Policy{}), "create Store");
      auto ws = Must(Workspace::Open(*st, {.branch = "main"}), "open Workspace");
      (void)ws;
    }
    f.stores++;
    Model m;
    m.states = {State{}};
    {
      auto st = Must(Store::Open(store_dir), "open Store");
      m.head = *Must(st->BranchHead("main"), "head");
    }
    int fork_seq = 0;
    for (int e = 0; e < o.epochs_per_store && point < o.points; e++, point++) {
      const uint64_t point_seed = rng();
      std::mt19937_64 prng(point_seed);
      fs::remove_all(shadow_dir, ec);
      fs::create_directories(shadow_dir);
      auto pl = Must(kv::PowerLoss::Start(store_dir, shadow_dir), "start power-loss layer");
      const uint64_t cut_at = 1 + prng() % (est_ops + est_ops / 4);
      pl->CutAt(cut_at);
      const uint64_t coin = prng() % 2;
      const auto mode = (o.mode == 2 ? coin : o.mode) ? kv::PowerLoss::Mode::kRandom : kv::PowerLoss::Mode::kDropAll;
      const std::string where = fmt::format("seed {} point {} (cut at call {}, {})", o.seed, point, cut_at,
                                            mode == kv::PowerLoss::Mode::kRandom ? "random" : "drop-all");
      {
        auto st = Store::Open(store_dir, {.io = pl});
        if (!st.ok()) {
          if (!pl->cut()) Fail(where + ": open: " + st.status().ToString());
          f.cut_in_open++;
        } else {
          auto ws = Workspace::Open(**st, {.branch = "main"});
          if (!ws.ok()) {
            if (!pl->cut()) Fail(where + ": open Workspace: " + ws.status().ToString());
            f.cut_in_open++;
          } else if (pl->cut()) {
            f.cut_in_open++;
          } else {
            if (!Check(**st, **ws, m, f, where + " after recovery", [&] { return pl->cut(); })) {
              f.cut_in_open++;
              goto closed;
            }
            (*st)->StartBackgroundEncoding();
            bool on = true;
            for (int i = 0; i < o.ops_per_epoch && on; i++)
              on = RunOp(**st, **ws, m, f, prng, fork_seq, [&] { return pl->cut(); });
            if (on) {
              // The budget ran out first: learn how many calls an epoch makes, and cut now.
              est_ops = (est_ops * 3 + pl->operations()) / 4;
              pl->Cut();
              f.cut_at_end++;
            } else {
              f.cut_in_workload++;
            }
          }
        }
      }
    closed:
      auto loss = Must(pl->Apply(mode, prng()), where + ": apply the cut");
      f.points++;
      (mode == kv::PowerLoss::Mode::kRandom ? f.random : f.drop_all)++;
      f.bytes_dropped += loss.bytes_dropped;
      f.bytes_kept += loss.bytes_kept;
      f.files_cut += loss.files_cut;
      f.names_undone += loss.names_undone;
      f.names_kept += loss.names_kept;
      if (o.verbose)
        fmt::print("{}: dropped {} bytes of {} files, kept {}, names undone {} kept {}\n", where, loss.bytes_dropped,
                   loss.files_cut, loss.bytes_kept, loss.names_undone, loss.names_kept);
    }
    // The last cut's recovery, with the power on.
    auto st = Must(Store::Open(store_dir), "final open");
    auto ws = Must(Workspace::Open(*st, {.branch = "main"}), "final open Workspace");
    Check(*st, *ws, m, f, fmt::format("seed {} after point {}", o.seed, point - 1), [] { return false; });
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(
      "power loss: seed {}: {} crash points in {} Stores, {:.1f} s ({} drop-all, {} random; cut in recovery {}, in the "
      "workload {}, at its end {})\n"
      "  workload: {} operations, {} fsyncs, {} commits, {} forks, {} gc, {} whole-block writes\n"
      "  dropped: {} unsynced bytes in {} file cuts; kept (random) {} bytes; names undone {}, kept {}\n"
      "  checked: {} Commit reads, {} objects verified; Workspace came back as the last state {}, the interrupted "
      "operation's {}, an earlier unsynced state {}\n"
      "  lost: {} fsync'ed bytes, {} reported Commits\n",
      o.seed, f.points, f.stores, secs, f.drop_all, f.random, f.cut_in_open, f.cut_in_workload, f.cut_at_end, f.ops,
      f.fsyncs, f.commits, f.forks, f.gcs, f.block_writes, f.bytes_dropped, f.files_cut, f.bytes_kept, f.names_undone,
      f.names_kept, f.commits_checked, f.verify_objects, f.matched_last, f.matched_inflight, f.matched_older,
      f.lost_synced_bytes, f.lost_commits);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) % 1000000;
  bool points_given = false;
  int soak_points = 3000;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Fail("missing value for " + a);
      return argv[++i];
    };
    if (a == "--points") {
      o.points = std::stoi(next());
      points_given = true;
    } else if (a == "--seed") {
      o.seed = std::stoull(next());
    } else if (a == "--soak") {
      o.soak = true;
      // An optional count.
      if (i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9') soak_points = std::stoi(argv[++i]);
    } else if (a == "--dir") {
      o.dir = next();
    } else if (a == "--mode") {
      std::string v = next();
      o.mode = v == "drop-all" ? 0 : v == "random" ? 1 : 2;
    } else if (a == "-v") {
      o.verbose = true;
    } else {
      fmt::print(stderr,
                 "usage: layerfs_power_loss [--points N] [--seed S] [--soak [N]] [--dir D] [--mode drop-all|random|both] "
                 "[-v]\n");
      return 2;
    }
  }
  if (const char* e = getenv("LAYERFS_POWER_LOSS_SOAK"); e && *e && std::string(e) != "0") {
    o.soak = true;
    if (const int n = std::atoi(e); n > 1) soak_points = n;
  }
  if (o.soak && !points_given) o.points = soak_points;
  bool made = false;
  if (o.dir.empty()) {
    // tmpfs when there is one: the layer models durability, the disk's own syncs only cost time.
    std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : fs::temp_directory_path().string();
    std::string tmpl = base + "/layerfs_power_loss_XXXXXX";
    if (!mkdtemp(tmpl.data())) Fail("mkdtemp: " + std::string(strerror(errno)));
    o.dir = tmpl;
    made = true;
    g_cleanup = o.dir;
  }
  fmt::print("power loss: seed {} ({} points); rerun with --seed {}\n", o.seed, o.points, o.seed);
  std::fflush(stdout);
  int rc = Run(o);
  if (made) {
    std::error_code ec;
    fs::remove_all(o.dir, ec);
  }
  return rc;
}
