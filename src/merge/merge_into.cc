// MergeInto, ContinueMerge, AbortMerge and the merge record.
#include "merge/merge_into.h"

#include "base/coding.h"
#include "kv/kv.h"

namespace layerfs::merge {

namespace {

void PutSide(std::string* s, const std::optional<TreeEntry>& e) {
  base::PutU8(s, e ? 1 : 0);
  if (!e) return;
  base::PutU8(s, static_cast<uint8_t>(e->type));
  base::PutVarint(s, e->mode);
  base::PutVarint(s, e->size);
  s->append(e->id.AsKey());
  base::PutBytes(s, e->target);
}

bool GetSide(base::Reader& r, std::optional<TreeEntry>* e) {
  uint8_t present, type;
  if (!r.U8(&present)) return false;
  if (!present) return true;
  TreeEntry t;
  uint64_t mode, size;
  std::string_view id, target;
  if (!r.U8(&type) || type < 1 || type > 7 || !r.Varint(&mode) || !r.Varint(&size) || !r.Raw(ObjectId::kSize, &id) ||
      !r.Bytes(&target))
    return false;
  t.type = static_cast<EntryType>(type);
  t.mode = static_cast<uint32_t>(mode);
  t.size = size;
  t.id = ObjectId::FromKey(id);
  t.target = target;
  *e = std::move(t);
  return true;
}

std::string Short(const ObjectId& id) { return id.Hex().substr(0, 12); }

}  // namespace

// FORMAT (docs/format.md, "Merge record"): u8 version (1), 16-byte pending Commit, 16-byte ours,
// 16-byte theirs, bytes source label, bytes message, varint bases, ids, varint conflicts, then
// per conflict: bytes path, u8 kind, three sides (base, ours, theirs: u8 present, then u8 type,
// varint mode, varint size, 16-byte id, bytes target), varint sides, bytes side paths; then, for
// a cherry-pick or revert only, u8 operation (MergeOp).
std::string EncodeMergeState(const MergeState& m) {
  std::string s;
  base::PutU8(&s, 1);
  s.append(m.pending.AsKey());
  s.append(m.ours.AsKey());
  s.append(m.theirs.AsKey());
  base::PutBytes(&s, m.source_label);
  base::PutBytes(&s, m.message);
  base::PutVarint(&s, m.bases.size());
  for (const auto& b : m.bases) s.append(b.AsKey());
  base::PutVarint(&s, m.conflicts.size());
  for (const auto& c : m.conflicts) {
    base::PutBytes(&s, c.path);
    base::PutU8(&s, static_cast<uint8_t>(c.kind));
    PutSide(&s, c.base);
    PutSide(&s, c.ours);
    PutSide(&s, c.theirs);
    base::PutVarint(&s, c.sides.size());
    for (const auto& p : c.sides) base::PutBytes(&s, p);
  }
  if (m.op != MergeOp::kMerge) base::PutU8(&s, static_cast<uint8_t>(m.op));
  return s;
}

Result<MergeState> DecodeMergeState(std::string_view rec) {
  base::Reader r(rec);
  MergeState m;
  uint8_t ver;
  std::string_view p, o, t, label, msg;
  uint64_t nb, nc;
  auto bad = [] { return Status::Corrupt("workspace: damaged merge record"); };
  if (!r.U8(&ver) || ver != 1 || !r.Raw(16, &p) || !r.Raw(16, &o) || !r.Raw(16, &t) || !r.Bytes(&label) ||
      !r.Bytes(&msg) || !r.Varint(&nb) || nb > rec.size())
    return bad();
  m.pending = ObjectId::FromKey(p);
  m.ours = ObjectId::FromKey(o);
  m.theirs = ObjectId::FromKey(t);
  m.source_label = label;
  m.message = msg;
  for (uint64_t i = 0; i < nb; i++) {
    std::string_view id;
    if (!r.Raw(16, &id)) return bad();
    m.bases.push_back(ObjectId::FromKey(id));
  }
  if (!r.Varint(&nc) || nc > rec.size()) return bad();
  for (uint64_t i = 0; i < nc; i++) {
    Conflict c;
    std::string_view path;
    uint8_t kind;
    uint64_t ns;
    if (!r.Bytes(&path) || !r.U8(&kind) || kind < 1 || kind > 9 || !GetSide(r, &c.base) || !GetSide(r, &c.ours) ||
        !GetSide(r, &c.theirs) || !r.Varint(&ns) || ns > rec.size())
      return bad();
    c.path = path;
    c.kind = static_cast<ConflictKind>(kind);
    for (uint64_t j = 0; j < ns; j++) {
      std::string_view sp;
      if (!r.Bytes(&sp)) return bad();
      c.sides.emplace_back(sp);
    }
    m.conflicts.push_back(std::move(c));
  }
  if (!r.AtEnd()) {
    uint8_t op;
    if (!r.U8(&op) || op > 2) return bad();
    m.op = static_cast<MergeOp>(op);
  }
  return m;
}

Result<std::optional<MergeState>> ReadMergeState(workspace::Workspace& ws) {
  LFS_ASSIGN(auto rec, ws.MergeRecord());
  if (!rec) return std::optional<MergeState>();
  LFS_ASSIGN(auto m, DecodeMergeState(*rec));
  return std::optional<MergeState>(std::move(m));
}

namespace {

// Where a merge's result lands: a branch, through its live Workspace when there is one.
struct Landing {
  Store& store;
  const std::string& branch;
  workspace::Workspace* ws;
  ObjectId ours, ours_root;
  objects::Txn* txn;

  // Moves the branch to `to` (a staged or existing Commit whose tree is `root`), through the
  // Workspace when there is one, in one batch with the staged objects.
  Status Publish(const ObjectId& to, const ObjectId& root) const {
    if (!ws) return store.UpdateBranch(branch, ours, to, nullptr, txn);
    workspace::ApplyRequest req;
    LFS_ASSIGN(req.diff, store.DiffTrees(ours_root, root, txn));
    req.expected_base = ours;
    req.new_base = to;
    req.publish = [&](kv::Batch* b) { return store.UpdateBranch(branch, ours, to, b, txn); };
    return ws->Apply(req);
  }

  // Stops `op` on out->conflicts with `commit` pending (see Stop) and marks `out` stopped.
  Status StopOn(MergeOp op, const ObjectId& root, const ObjectId& commit, const std::string& label,
                const std::string& message, MergeOutcome* out) const {
    MergeState state;
    state.op = op;
    state.pending = commit;
    state.ours = out->ours;
    state.theirs = out->theirs;
    state.source_label = label;
    state.message = message;
    state.bases = out->bases;
    state.conflicts = out->conflicts;
    LFS_TRY(Stop(root, state));
    out->stopped = true;
    return Status::Ok();
  }

  // Stopped on conflicts: the merged tree with its conflict files becomes the Workspace's
  // uncommitted state, and the pending Commit (on no branch) keeps its objects alive until the
  // merge ends.
  Status Stop(const ObjectId& root, const MergeState& state) const {
    workspace::ApplyRequest req;
    LFS_ASSIGN(req.diff, store.DiffTrees(ours_root, root, txn));
    req.expected_base = ours;
    req.merge_record = EncodeMergeState(state);
    req.publish = [&](kv::Batch* b) {
      kv::Batch all;
      store.objects().TakeBatch(&all, txn);
      for (const auto& e : b->entries()) all.Add(e);
      Status s = store.kv().Write(all, true);
      if (!s.ok()) store.objects().ClearCache();
      return s;
    };
    return ws->Apply(req);
  }
};

// The branch head, checked against its Workspace (no merge in progress, at the head).
Result<ObjectId> StartOn(Store& store, const std::string& branch, workspace::Workspace* ws) {
  LFS_ASSIGN(auto head, store.BranchHead(branch));
  if (!head) return Status::NotFound(fmt::format("no branch '{}'", branch));
  if (ws) {
    LFS_ASSIGN(auto state, ReadMergeState(*ws));
    if (state)
      return Status::Errorf(EBUSY, "a merge of {} into {} is in progress: finish it with --continue or --abort",
                            state->source_label, branch);
    if (ws->base_commit() != *head)
      return Status::Errorf(EAGAIN, "the workspace of {} is based on {}, not on the branch head {}", branch,
                            Short(ws->base_commit()), Short(*head));
  }
  return *head;
}

}  // namespace

Result<MergeOutcome> MergeInto(Store& store, const MergeIntoOptions& opts) {
  MergeOutcome out;
  LFS_ASSIGN(out.ours, StartOn(store, opts.branch, opts.ws));
  out.theirs = opts.source;
  const std::string message =
      opts.message.empty() ? fmt::format("merge {} into {}", opts.source_label, opts.branch) : opts.message;
  // Already contained: nothing to do.
  LFS_ASSIGN(bool contained, IsAncestor(store, out.theirs, out.ours));
  if (contained) {
    out.up_to_date = true;
    out.commit = out.ours;
    out.bases = {out.theirs};
    return out;
  }
  LFS_ASSIGN(bool ff_possible, IsAncestor(store, out.ours, out.theirs));
  LFS_ASSIGN(auto ours_c, store.GetCommit(out.ours));
  LFS_ASSIGN(auto theirs_c, store.GetCommit(out.theirs));
  objects::Txn txn;
  const Landing land{store, opts.branch, opts.ws, out.ours, ours_c.root, &txn};
  if (ff_possible && opts.ff != FastForward::kNever && opts.strategy != Strategy::kOurs) {
    out.fast_forward = true;
    out.bases = {out.ours};
    LFS_TRY(land.Publish(out.theirs, theirs_c.root));
    out.commit = out.theirs;
    return out;
  }
  if (opts.ff == FastForward::kOnly)
    return Status::Errorf(kNotFastForward, "{} cannot be fast-forwarded to {}: the histories diverged", opts.branch,
                          opts.source_label);
  TreeMergeResult tree;
  if (opts.strategy == Strategy::kThreeWay) {
    TreeMergeOptions to;
    to.favor = opts.favor;
    to.our_label = opts.branch;
    to.their_label = opts.source_label;
    LFS_ASSIGN(auto m, MergeCommits(store, out.ours, out.theirs, to, &txn));
    out.bases = std::move(m.bases);
    tree = std::move(m.tree);
  } else {
    LFS_ASSIGN(out.bases, MergeBases(store, {out.ours}, {out.theirs}));
    const CommitInfo& side = opts.strategy == Strategy::kOurs ? ours_c : theirs_c;
    tree.root = side.root;
    tree.bytes = side.logical_bytes;
    tree.entries = side.files;
  }
  out.conflicts = tree.conflicts;
  LFS_ASSIGN(ObjectId commit, store.StageCommit(tree.root, {out.ours, out.theirs}, message, tree.bytes,
                                                tree.entries, &txn));
  if (out.conflicts.empty()) {
    LFS_TRY(land.Publish(commit, tree.root));
    out.commit = commit;
    return out;
  }
  if (!opts.ws || !opts.keep_conflicts) return out;  // reported; nothing changed
  LFS_TRY(land.StopOn(MergeOp::kMerge, tree.root, commit, opts.source_label, message, &out));
  return out;
}

Result<MergeOutcome> Pick(Store& store, const PickOptions& opts) {
  MergeOutcome out;
  LFS_ASSIGN(out.ours, StartOn(store, opts.branch, opts.ws));
  out.theirs = opts.commit;
  LFS_ASSIGN(auto c, store.GetCommit(opts.commit));
  if (c.parents.size() > 1)
    return Status::Invalid(fmt::format("{} is a merge Commit; {} of a merge is not supported", opts.label,
                                       opts.revert ? "revert" : "cherry-pick"));
  objects::Txn txn;
  ObjectId parent_root;
  if (c.parents.empty()) {
    LFS_ASSIGN(parent_root, EmptyTree(store, &txn));
  } else {
    LFS_ASSIGN(auto p, store.GetCommit(c.parents[0]));
    parent_root = p.root;
    out.bases = {c.parents[0]};
  }
  LFS_ASSIGN(auto ours_c, store.GetCommit(out.ours));
  TreeMergeOptions to;
  to.favor = opts.favor;
  to.our_label = opts.branch;
  to.their_label = opts.label;
  const ObjectId& base = opts.revert ? c.root : parent_root;
  const ObjectId& theirs = opts.revert ? parent_root : c.root;
  LFS_ASSIGN(auto tree, MergeTrees(store, base, ours_c.root, theirs, to, &txn));
  if (tree.conflicts.empty() && tree.root == ours_c.root)
    return Status::Invalid(fmt::format("{} of {} changes nothing on {}", opts.revert ? "revert" : "cherry-pick",
                                       opts.label, opts.branch));
  const std::string message = opts.revert ? fmt::format("revert \"{}\"\n\nThis reverts {}.", c.message, c.id.Hex())
                                          : c.message;
  out.conflicts = tree.conflicts;
  LFS_ASSIGN(ObjectId commit, store.StageCommit(tree.root, {out.ours}, message, tree.bytes, tree.entries, &txn));
  const Landing land{store, opts.branch, opts.ws, out.ours, ours_c.root, &txn};
  if (out.conflicts.empty()) {
    LFS_TRY(land.Publish(commit, tree.root));
    out.commit = commit;
    return out;
  }
  if (!opts.ws || !opts.keep_conflicts) return out;
  LFS_TRY(land.StopOn(opts.revert ? MergeOp::kRevert : MergeOp::kCherryPick, tree.root, commit, opts.label,
                      message, &out));
  return out;
}

Result<std::vector<Unresolved>> UnresolvedPaths(workspace::Workspace& ws, const MergeState& s) {
  std::vector<Unresolved> out;
  for (const auto& c : s.conflicts) {
    for (const auto& side : c.sides) {
      auto a = ws.LookupPath(side);
      if (a.ok()) out.push_back({side, "side file still there"});
      else if (a.status().code() != ENOENT && a.status().code() != ENOTDIR) return a.status();
    }
    if (c.kind != ConflictKind::kContent && c.kind != ConflictKind::kAddAdd) continue;
    if (!c.sides.empty()) continue;  // binary add/add: sides, no markers
    auto a = ws.LookupPath(c.path);
    if (!a.ok() || !S_ISREG(a->mode)) continue;
    LFS_ASSIGN(std::string data, ws.Read(a->ino, 0, a->size));
    // A conflict hunk as written: a line of "<<<<<<< " or ">>>>>>> " (seven markers, a label).
    for (size_t pos = 0; pos < data.size();) {
      size_t end = data.find('\n', pos);
      if (end == std::string::npos) end = data.size();
      std::string_view line(data.data() + pos, end - pos);
      if (line.rfind("<<<<<<< ", 0) == 0 || line.rfind(">>>>>>> ", 0) == 0) {
        out.push_back({c.path, "conflict markers still there"});
        break;
      }
      pos = end + 1;
    }
  }
  return out;
}

Result<MergeOutcome> ContinueMerge(Store& store, workspace::Workspace& ws, const std::string& message) {
  LFS_ASSIGN(auto state, ReadMergeState(ws));
  if (!state) return Status::Error(ENOENT, fmt::format("no merge in progress in {}", ws.branch()));
  LFS_ASSIGN(auto unresolved, UnresolvedPaths(ws, *state));
  if (!unresolved.empty()) {
    std::string list;
    for (size_t i = 0; i < unresolved.size() && i < 5; i++)
      list += fmt::format("{}{} ({})", i ? ", " : "", unresolved[i].path, unresolved[i].why);
    if (unresolved.size() > 5) list += fmt::format(" and {} more", unresolved.size() - 5);
    return Status::Errorf(EBUSY, "{} unresolved: {}; edit the files, delete the side files, then --continue",
                          unresolved.size() == 1 ? "1 path is" : fmt::format("{} paths are", unresolved.size()), list);
  }
  MergeOutcome out;
  out.ours = state->ours;
  out.theirs = state->theirs;
  out.bases = state->bases;
  std::vector<ObjectId> more;
  if (state->op == MergeOp::kMerge) more.push_back(state->theirs);
  LFS_ASSIGN(ObjectId id, ws.Commit(message.empty() ? state->message : message, more, /*end_merge=*/true));
  out.commit = id;
  return out;
}

Status AbortMerge(Store& store, workspace::Workspace& ws) {
  LFS_ASSIGN(auto state, ReadMergeState(ws));
  if (!state) return Status::Error(ENOENT, fmt::format("no merge in progress in {}", ws.branch()));
  LFS_ASSIGN(auto pending, store.GetCommit(state->pending));
  LFS_ASSIGN(auto ours, store.GetCommit(state->ours));
  workspace::ApplyRequest req;
  LFS_ASSIGN(req.diff, store.DiffTrees(pending.root, ours.root));
  req.expected_base = state->ours;
  req.force = true;
  req.merge_record = std::string();
  return ws.Apply(req);
}

}  // namespace layerfs::merge
