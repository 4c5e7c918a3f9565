// layerfs_craft STORE SCENARIO [ARG]: creates a Store whose branch main holds hand-made objects
// (or whose files are hand-made), for tests/hostile/crafted_store_test.sh (docs/reliability.md,
// "Crafted Stores"). The objects are written as a hostile author would: names a decoder must
// refuse, lying sizes, counts and chain depths, cycles of ids (which the keyed hash cannot
// match), link groups that join what they must not, trees nested too deep or too wide.
// `layerfs_craft --list` prints the scenarios. ARG, where a scenario takes one, is a path the
// crafted objects point at (a symlink target outside the Store).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include "base/coding.h"
#include "base/hash.h"
#include "codec/zstd_codec.h"
#include "history/keys.h"
#include "kv/kv.h"
#include "layerfs/store.h"
#include "objects/object_store.h"
#include "objects/tree.h"
#include "workspace/inode.h"
#include "workspace/workspace.h"

using namespace layerfs;
using objects::Kind;

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "layerfs_craft: %s\n", what.c_str());
  std::exit(1);
}
template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) Die(std::string(what) + ": " + r.status().ToString());
  return std::move(*r);
}
void Must(Status s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

struct Crafter {
  Store& st;
  std::string arg;

  ObjectId Put(Kind k, std::string_view content) { return Must(st.objects().Put(k, content, std::nullopt), "put").id; }
  TreeEntry File(const std::string& name, std::string_view content) {
    TreeEntry e;
    e.name = name;
    e.mode = 0644;
    e.id = content.empty() ? ObjectId{} : Put(Kind::kBlob, content);
    e.size = content.size();
    e.mtime_sec = 1700000000;
    return e;
  }
  TreeEntry Link(const std::string& name, const std::string& target) {
    TreeEntry e;
    e.name = name;
    e.type = EntryType::kSymlink;
    e.mode = 0777;
    e.target = target;
    e.size = target.size();
    return e;
  }
  // A directory entry over `entries`, with its counts computed honestly.
  static std::vector<TreeEntry> Sorted(std::vector<TreeEntry> entries) {
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return entries;
  }
  TreeEntry Dir(const std::string& name, const std::vector<TreeEntry>& entries) {
    TreeEntry e;
    e.name = name;
    e.type = EntryType::kDir;
    e.mode = 0755;
    e.id = Put(Kind::kTree, objects::EncodeTree(Sorted(entries)));
    for (const auto& c : entries) {
      e.subtree_entries += 1 + (c.type == EntryType::kDir ? c.subtree_entries : 0);
      e.size += c.type == EntryType::kSymlink ? 0 : c.size;
    }
    return e;
  }
  // A raw record under a chosen id (what the keyed hash would never give it).
  void Raw(kv::Cf cf, const ObjectId& id, std::string_view record) {
    kv::Batch b;
    b.Put(cf, id.AsKey(), record);
    Must(st.kv().Write(b, true), "write record");
  }
  static std::string Header(Kind k, objects::Encoding enc, uint64_t depth, uint64_t size) {
    std::string h;
    base::PutU8(&h, static_cast<uint8_t>(k));
    base::PutU8(&h, static_cast<uint8_t>(enc));
    base::PutVarint(&h, depth);
    base::PutVarint(&h, size);
    return h;
  }
  // Commits `root` (a tree id) on main, claiming `files` entries and `bytes` file bytes.
  ObjectId Commit(const ObjectId& root, uint64_t files, uint64_t bytes = 0) {
    auto head = Must(st.BranchHead("main"), "head");
    return Must(st.CommitTree("main", root, head, "crafted", bytes, files), "commit");
  }
  // Commits a tree of `entries`, claiming `files` entries (by default the honest count, from the
  // entries' own counts).
  ObjectId CommitEntries(const std::vector<TreeEntry>& entries, std::optional<uint64_t> files = std::nullopt) {
    uint64_t n = 0, bytes = 0;
    for (const auto& e : entries) {
      n += 1 + (e.type == EntryType::kDir ? e.subtree_entries : 0);
      bytes += e.type == EntryType::kSymlink ? 0 : e.size;
    }
    return Commit(Put(Kind::kTree, objects::EncodeTree(Sorted(entries))), files.value_or(n), bytes);
  }
};

using Scenario = std::function<void(Crafter&)>;

std::map<std::string, std::pair<std::string, Scenario>> Scenarios() {
  std::map<std::string, std::pair<std::string, Scenario>> s;
  auto bad_name = [](std::string name) {
    return [name](Crafter& c) {
      // A directory whose one entry has the bad name, beside a good file.
      c.CommitEntries({c.File("good", "fine\n"), c.Dir("sub", {c.File(name, "escaped\n")})});
    };
  };
  s["name-slash"] = {"an entry named ../../escaped", bad_name("../../escaped")};
  s["name-dotdot"] = {"an entry named ..", bad_name("..")};
  s["name-dot"] = {"an entry named .", bad_name(".")};
  s["name-nul"] = {"an entry with a NUL in its name", bad_name(std::string("a\0b", 3))};
  s["name-long"] = {"an entry with a 256-byte name", bad_name(std::string(256, 'n'))};
  s["name-empty"] = {"an entry with an empty name", bad_name("")};
  s["symlink-loops"] = {"symlinks in loops and pointing out of the tree (ARG: a path outside)", [](Crafter& c) {
    c.CommitEntries({c.Link("a", "b"), c.Link("b", "a"), c.Link("loop", "loop"), c.Link("out", c.arg),
                     c.Dir("d", {c.Link("up", "../../../../../../../../.."), c.File("f", "inside\n")})});
  }};
  s["link-group-symlink"] = {"a hard-link group whose first name is a symlink out of the tree (ARG)", [](Crafter& c) {
    TreeEntry l = c.Link("a", c.arg), f = c.File("b", "payload\n");
    l.link_group = f.link_group = 7;
    c.CommitEntries({l, f});
  }};
  s["link-group-dir"] = {"a directory in a hard-link group with a file", [](Crafter& c) {
    TreeEntry d = c.Dir("d", {c.File("f", "x")}), f = c.File("g", "y");
    d.link_group = f.link_group = 3;
    c.CommitEntries({d, f});
  }};
  s["huge-file-size"] = {"a file entry of 2^62 bytes over 6 bytes of content", [](Crafter& c) {
    TreeEntry f = c.File("huge", "short\n");
    f.size = 1ull << 62;
    c.CommitEntries({f, c.File("ok", "ok\n")});
  }};
  s["huge-record-size"] = {"a blob record declaring 2^62 decoded bytes", [](Crafter& c) {
    const ObjectId id = base::HashContent("bomb", c.st.objects().seed());
    c.Raw(kv::Cf::kBlobs, id, Crafter::Header(Kind::kBlob, objects::Encoding::kZstd, 0, 1ull << 62) +
                                  Must(codec::Compress("bomb", 3), "compress"));
    TreeEntry f = c.File("bomb", "");
    f.id = id;
    f.size = 4;
    c.CommitEntries({f});
  }};
  s["zstd-bomb"] = {"a tree record whose frame really yields 200 MiB of zeros", [](Crafter& c) {
    const std::string zeros(200 << 20, '\0');
    const ObjectId id = base::HashContent("not these bytes", c.st.objects().seed());
    c.Raw(kv::Cf::kTrees, id, Crafter::Header(Kind::kTree, objects::Encoding::kZstd, 0, zeros.size()) +
                                  Must(codec::Compress(zeros, 19), "compress"));
    TreeEntry d;
    d.name = "d";
    d.type = EntryType::kDir;
    d.mode = 0755;
    d.id = id;
    c.CommitEntries({d}, 1);
  }};
  s["tree-cycle"] = {"a tree that names itself (stored under an id its bytes do not hash to)", [](Crafter& c) {
    const ObjectId id = base::HashContent("cycle", c.st.objects().seed());
    TreeEntry d;
    d.name = "self";
    d.type = EntryType::kDir;
    d.mode = 0755;
    d.id = id;
    d.subtree_entries = 1;
    const std::string tree = objects::EncodeTree({d});
    c.Raw(kv::Cf::kTrees, id, Crafter::Header(Kind::kTree, objects::Encoding::kRaw, 0, tree.size()) + tree);
    c.Commit(id, 2);
  }};
  s["chain-loop"] = {"two delta records that are each other's base", [](Crafter& c) {
    const uint64_t seed = c.st.objects().seed();
    const ObjectId a = base::HashContent("version a", seed), b = base::HashContent("version b", seed);
    c.Raw(kv::Cf::kBlobs, a, Crafter::Header(Kind::kBlob, objects::Encoding::kDelta, 2, 9) + std::string(b.AsKey()) + "zz");
    c.Raw(kv::Cf::kBlobs, b, Crafter::Header(Kind::kBlob, objects::Encoding::kDelta, 1, 9) + std::string(a.AsKey()) + "zz");
    TreeEntry f = c.File("f", "");
    f.id = a;
    f.size = 9;
    c.CommitEntries({f});
  }};
  s["chain-depth-lies"] = {"a delta claiming depth 1000 over a full record", [](Crafter& c) {
    const uint64_t seed = c.st.objects().seed();
    const ObjectId base = c.Put(Kind::kBlob, "base content\n");
    const ObjectId a = base::HashContent("base content, edited\n", seed);
    c.Raw(kv::Cf::kBlobs, a, Crafter::Header(Kind::kBlob, objects::Encoding::kDelta, 1000, 21) +
                                 std::string(base.AsKey()) + "zz");
    TreeEntry f = c.File("f", "");
    f.id = a;
    f.size = 21;
    c.CommitEntries({f});
  }};
  s["subtree-count-lies"] = {"a directory whose entry under-counts its subtree (inode numbers collide)", [](Crafter& c) {
    TreeEntry d = c.Dir("d", {c.File("a", "1"), c.File("b", "2"), c.File("c", "3")});
    d.subtree_entries = 1;
    c.CommitEntries({d, c.File("z", "z")}, 3);
  }};
  s["subtree-count-overflow"] = {"a directory claiming 2^64-2 entries below it", [](Crafter& c) {
    TreeEntry d = c.Dir("d", {c.File("a", "1")});
    d.subtree_entries = ~0ull - 1;
    c.CommitEntries({d, c.File("z", "z")}, 5);
  }};
  s["commit-count-huge"] = {"a Commit claiming 2^63 entries", [](Crafter& c) {
    c.CommitEntries({c.File("a", "1")}, 1ull << 63);
  }};
  s["deep-tree"] = {"directories nested 3000 deep", [](Crafter& c) {
    std::vector<TreeEntry> level = {c.File("leaf", "deep\n")};
    for (int i = 0; i < 3000; i++) level = {c.Dir("d", level)};
    c.CommitEntries(level);
  }};
  s["wide-dag"] = {"a tree of 2^60 paths over 60 trees, its Commit claiming 3 entries", [](Crafter& c) {
    TreeEntry cur = c.File("f", "leaf\n");
    for (int i = 0; i < 60; i++) {
      TreeEntry a = cur, b = cur;
      a.name = "a";
      b.name = "b";
      cur = c.Dir("d", {a, b});
      cur.subtree_entries = 1;  // what a liar would say
    }
    c.CommitEntries({cur}, 3);
  }};
  s["workspace-loop"] = {"a Workspace whose directory d holds its own root as 'loop'", [](Crafter& c) {
    c.CommitEntries({c.File("a", "1")});
    auto ws = Must(workspace::Workspace::Open(c.st, {.read_only = false, .branch = "main", .commit = {}}), "open");
    auto d = Must(ws->Mkdir(workspace::kRootIno, "d", 0755, {}), "mkdir");
    auto v = Must(c.st.kv().Get(kv::Cf::kMeta, "ws/main"), "wsid");
    if (!v || v->size() != 8) Die("no workspace id");
    workspace::Keys keys(base::GetBigEndian64(v->data()));
    std::string entry;
    base::PutVarint(&entry, workspace::kRootIno);
    base::PutU8(&entry, static_cast<uint8_t>(EntryType::kDir));
    kv::Batch b;
    b.Put(kv::Cf::kWorkspace, keys.Entry(d.ino, "loop"), entry);
    Must(c.st.kv().Write(b, true), "write loop");
  }};
  s["ws-counter-huge"] = {"a Store whose Workspace-id counter is 2^63", [](Crafter& c) {
    c.CommitEntries({c.File("a", "1")});
    std::string next;
    base::PutBigEndian64(&next, 1ull << 63);
    kv::Batch b;
    b.Put(kv::Cf::kMeta, "ws-next", next);
    Must(c.st.kv().Write(b, true), "write counter");
  }};
  s["honest"] = {"an ordinary tree (the control case)", [](Crafter& c) {
    TreeEntry h1 = c.File("h1", "linked\n"), h2 = h1;
    h2.name = "h2";
    h1.link_group = h2.link_group = 1;
    c.CommitEntries({c.File("a", "hello\n"), c.Dir("d", {c.File("b", "bee\n"), c.Link("l", "../a")}), h1, h2});
  }};
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  auto scenarios = Scenarios();
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const auto& [name, s] : scenarios) std::printf("%-24s %s\n", name.c_str(), s.first.c_str());
    return 0;
  }
  if (argc < 3 || argc > 4 || !scenarios.count(argv[2])) {
    std::fprintf(stderr, "usage: %s STORE SCENARIO [ARG] (--list for the scenarios)\n", argv[0]);
    return 2;
  }
  auto st = Must(Store::Create(argv[1], Policy{}), "create store");
  Crafter c{*st, argc == 4 ? argv[3] : "/"};
  scenarios.at(argv[2]).second(c);
  return 0;
}
