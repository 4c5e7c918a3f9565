// Push: a post-order walk from the pushed heads that skips what the remote's indexes already
// hold, packs of the records as stored, then compare-and-swap of each remote branch.
#include <atomic>
#include <chrono>
#include <deque>
#include <unordered_set>

#include "history/keys.h"
#include "objects/object_store.h"
#include "objects/tree.h"
#include "remote/remote.h"
#include "remote/sync.h"

namespace layerfs::remote {

using objects::Kind;

namespace {

struct NodeKey {
  kv::Cf cf;
  ObjectId id;
  bool operator==(const NodeKey&) const = default;
};
struct NodeKeyHash {
  size_t operator()(const NodeKey& k) const { return ObjectIdHash()(k.id) ^ static_cast<size_t>(k.cf); }
};

std::atomic<size_t> g_pack_target{kPackTarget};

int PackLevel() {
  const char* env = getenv("LAYERFS_PACK_LEVEL");
  int v = env ? atoi(env) : 0;
  return v >= 1 && v <= 22 ? v : 19;
}

// Sends, in post-order, every object reachable from `heads` that the remote does not index,
// with the delta bases their records need.
class Sender {
 public:
  Sender(Store& store, Remote& remote, ProgressMeter& meter, TransferStats* stats)
      : os_(store.objects()), remote_(remote), meter_(meter), stats_(stats), builder_(PackLevel()) {}

  Status Send(const std::vector<ObjectId>& heads) {
    struct Item {
      Kind kind;
      ObjectId id;
      bool expanded = false;
      int depth = 0;  // tree nesting, bounded
      std::string record;
    };
    std::vector<Item> stack;
    for (const auto& h : heads) stack.push_back({Kind::kCommit, h});
    while (!stack.empty()) {
      Item& top = stack.back();
      if (top.expanded) {
        Item it = std::move(top);
        stack.pop_back();
        LFS_TRY(Emit(it.kind, it.id, it.record));
        continue;
      }
      NodeKey key{objects::CfOf(top.kind), top.id};
      if (done_.count(key)) {
        stack.pop_back();
        continue;
      }
      done_.insert(key);
      LFS_ASSIGN(auto loc, remote_.Lookup(key.cf, key.id));
      if (loc) {  // on the remote, with its whole closure
        stack.pop_back();
        continue;
      }
      if (static_cast<size_t>(top.depth) > objects::kMaxTreeDepth)
        return Status::Corrupt(fmt::format("tree {}: nested deeper than {} levels", top.id.Hex(), objects::kMaxTreeDepth));
      top.expanded = true;
      LFS_ASSIGN(auto rec, os_.Record(top.kind, top.id));
      if (!rec) return Status::Corrupt(fmt::format("{} {} is missing from this Store", objects::KindName(top.kind), top.id.Hex()));
      LFS_ASSIGN(auto info, objects::ParseRecord(*rec));
      if (info.encoding == objects::Encoding::kPending) {
        // Committed in the background and not encoded yet: its hint may be unknown to the remote
        // and no queue there would encode it. Encode it now, as the encoder would have (the
        // same record), and send that; a final record never changes again.
        LFS_TRY(os_.Finalize(top.kind, top.id));
        LFS_ASSIGN(rec, os_.Record(top.kind, top.id));
        if (!rec) return Status::Corrupt(fmt::format("{} {} is missing from this Store", objects::KindName(top.kind), top.id.Hex()));
        LFS_ASSIGN(info, objects::ParseRecord(*rec));
        if (info.encoding == objects::Encoding::kPending)
          return Status::Corrupt(fmt::format("{} {}: still pending after encoding", objects::KindName(top.kind), top.id.Hex()));
      }
      top.record = std::move(*rec);
      std::vector<Item> children;
      if (info.encoding == objects::Encoding::kDelta) children.push_back({info.kind, info.base});
      Kind kind = top.kind;
      ObjectId id = top.id;
      int depth = top.depth;
      if (kind == Kind::kCommit) {
        LFS_ASSIGN(std::string data, os_.Get(Kind::kCommit, id));
        LFS_ASSIGN(auto c, objects::DecodeCommit(data));
        children.push_back({Kind::kTree, c.root});
        for (const auto& p : c.parents) children.push_back({Kind::kCommit, p});
      } else if (kind == Kind::kTree) {
        LFS_ASSIGN(std::string data, os_.Get(Kind::kTree, id));
        LFS_ASSIGN(auto entries, objects::DecodeTree(data));
        for (const auto& e : entries) {
          if (e.type == EntryType::kDir) children.push_back({Kind::kTree, e.id, false, depth + 1});
          else if (e.type == EntryType::kFile && !e.id.IsZero())
            children.push_back({e.chunked ? Kind::kChunkList : Kind::kBlob, e.id});
        }
      } else if (kind == Kind::kChunkList) {
        LFS_ASSIGN(std::string data, os_.Get(Kind::kChunkList, id));
        LFS_ASSIGN(auto chunks, objects::DecodeChunkList(data));
        for (const auto& ch : chunks) children.push_back({Kind::kChunk, ch.id});
      }
      // `top` may move as the stack grows.
      for (auto& c : children)
        if (!c.id.IsZero() && !done_.count({objects::CfOf(c.kind), c.id})) stack.push_back(std::move(c));
    }
    return Flush();
  }

 private:
  Status Emit(Kind kind, const ObjectId& id, const std::string& record) {
    LFS_TRY(builder_.Add(kind, id, record));
    if (builder_.bytes() >= g_pack_target.load()) LFS_TRY(Flush());
    return Status::Ok();
  }

  Status Flush() {
    if (builder_.empty()) return Status::Ok();
    size_t n = builder_.records();
    LFS_ASSIGN(auto built, builder_.Finish());
    LFS_ASSIGN(uint64_t sent, remote_.PutPack(built.first, built.second));
    stats_->objects += n;
    stats_->bytes += sent;
    stats_->packs++;
    meter_.state().objects = stats_->objects;
    meter_.state().bytes = stats_->bytes;
    meter_.Update();
    return Status::Ok();
  }

  objects::ObjectStore& os_;
  Remote& remote_;
  ProgressMeter& meter_;
  TransferStats* stats_;
  PackBuilder builder_;
  std::unordered_set<NodeKey, NodeKeyHash> done_;
};

}  // namespace

void SetPackTargetForTesting(size_t bytes) { g_pack_target = bytes ? bytes : kPackTarget; }

bool PushResult::all_ok() const {
  for (const auto& r : refs)
    if (r.status == "rejected") return false;
  return true;
}

Result<bool> IsAncestor(Store& store, const ObjectId& ancestor, const ObjectId& descendant) {
  if (ancestor == descendant) return true;
  {
    // A commit this Store has never had cannot be in its history.
    LFS_ASSIGN(auto rec, store.objects().Record(Kind::kCommit, ancestor));
    if (!rec) return false;
  }
  std::unordered_set<ObjectId, ObjectIdHash> seen{descendant};
  std::deque<ObjectId> work{descendant};
  while (!work.empty()) {
    ObjectId c = work.front();
    work.pop_front();
    LFS_ASSIGN(auto info, store.GetCommit(c));
    for (const auto& p : info.parents) {
      if (p == ancestor) return true;
      if (seen.insert(p).second) work.push_back(p);
    }
  }
  return false;
}

Result<PushResult> Push(Store& store, const std::string& remote_name, const PushOptions& opts) {
  auto start = std::chrono::steady_clock::now();
  if (opts.branches.empty()) return Status::Invalid("push: no branch given");
  LFS_ASSIGN(auto remote, Remote::Open(store, remote_name));
  PushResult res;
  res.remote = remote_name;
  res.url = remote->info().url;
  // Local heads first: a branch that does not exist is a usage error, not a rejection.
  std::vector<std::pair<std::string, ObjectId>> local;
  for (const auto& b : opts.branches) {
    LFS_ASSIGN(auto head, store.BranchHead(b));
    if (!head) return Status::NotFound(fmt::format("no branch '{}'", b));
    local.emplace_back(b, *head);
  }
  LFS_TRY(remote->Attach(/*create=*/true).status());
  std::vector<std::optional<BranchHead>> remote_heads;
  for (const auto& [b, head] : local) {
    LFS_ASSIGN(auto rh, remote->Branch(b));
    remote_heads.push_back(std::move(rh));
  }
  LFS_TRY(remote->Refresh(&res.sent.indexes));
  // Decide each branch before sending anything.
  std::vector<ObjectId> send;
  for (size_t i = 0; i < local.size(); i++) {
    const auto& [b, head] = local[i];
    RefUpdate u{b, std::nullopt, head, "", ""};
    if (remote_heads[i]) u.old_id = remote_heads[i]->id;
    if (!u.old_id) {
      u.status = "created";
    } else if (*u.old_id == head) {
      u.status = "up-to-date";
    } else {
      LFS_ASSIGN(bool ff, IsAncestor(store, *u.old_id, head));
      if (ff) {
        u.status = "fast-forward";
      } else if (opts.force) {
        u.status = "forced";
      } else {
        LFS_ASSIGN(auto known, store.objects().Record(Kind::kCommit, *u.old_id));
        u.status = "rejected";
        u.reason = known ? "non-fast-forward: the remote branch has commits this one lacks; pull first"
                         : "fetch first: the remote branch has commits this Store has not seen";
      }
    }
    if (u.status != "up-to-date" && u.status != "rejected") send.push_back(head);
    res.refs.push_back(std::move(u));
  }
  ProgressMeter meter(opts.progress, "push");
  Sender sender(store, *remote, meter, &res.sent);
  LFS_TRY(sender.Send(send));
  meter.Done();
  // Refs last, one by one, by compare-and-swap against what was read.
  kv::Batch tracking;
  for (size_t i = 0; i < local.size(); i++) {
    RefUpdate& u = res.refs[i];
    const ObjectId head = local[i].second;
    std::optional<std::string> token;
    if (remote_heads[i]) token = remote_heads[i]->token;
    for (int attempt = 0; u.status != "rejected" && u.status != "up-to-date"; attempt++) {
      auto moved = remote->SetBranch(u.branch, head, token);
      if (moved.ok()) break;
      if (moved.status().code() != ESTALE || attempt >= 5) return moved.status();
      // Someone moved it meanwhile. Still a fast-forward (they pushed an ancestor of ours)?
      LFS_ASSIGN(auto now, remote->Branch(u.branch));
      if (now && now->id == head) {
        u.status = "up-to-date";
        break;
      }
      bool ff = false;
      if (now && !opts.force) {
        LFS_ASSIGN(ff, IsAncestor(store, now->id, head));
      }
      if (!ff) {
        u.status = "rejected";
        u.reason = "fetch first: the remote branch moved during the push";
        u.lost_race = true;
        break;
      }
      token = now->token;
      u.old_id = now->id;
    }
    if (u.status != "rejected") tracking.Put(kv::Cf::kMeta, history::RemoteRefKey(remote_name, u.branch), head.AsKey());
  }
  LFS_TRY(store.kv().Write(tracking, true));
  res.sent.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return res;
}

}  // namespace layerfs::remote
