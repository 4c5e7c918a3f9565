// VerifyWorkspaces: reads back every Workspace's records and every data-log block they point at,
// checking each block against its checksum, and names the branch and path of what is damaged.
#include <map>

#include "history/keys.h"
#include "kv/data_log.h"
#include "kv/kv.h"
#include "workspace/inode.h"

namespace layerfs::workspace {

namespace {

// "/a/b" of `ino` from the Workspace's entries (child -> (dir, name)); "inode N" if unnamed.
std::string PathIn(const std::map<Ino, std::pair<Ino, std::string>>& up, Ino ino) {
  std::string path;
  for (int depth = 0; ino != kRootIno; depth++) {
    auto it = up.find(ino);
    if (it == up.end() || depth > 4096) return fmt::format("inode {}{}", ino, path.empty() ? "" : " then " + path);
    path = "/" + it->second.second + path;
    ino = it->second.first;
  }
  return path.empty() ? "/" : path;
}

}  // namespace

Result<WorkspaceVerifyReport> VerifyWorkspaces(Store& store) {
  WorkspaceVerifyReport rep;
  kv::Kv& kv = store.kv();
  kv::DataLog& log = store.data_log();
  auto pin = log.PinSegments();  // no segment is collected while its records are read
  auto snap = kv.GetSnapshot();
  std::vector<std::pair<std::string, uint64_t>> spaces;  // branch, workspace id
  const std::string wp(kWsKeyPrefix);
  LFS_TRY(kv.Scan(kv::Cf::kMeta, wp, history::PrefixEnd(wp), [&](auto k, auto v) {
    if (v.size() == 8) spaces.emplace_back(std::string(k.substr(wp.size())), base::GetBigEndian64(v.data()));
    return true;
  }, snap.get()));
  for (const auto& [branch, wsid] : spaces) {
    rep.workspaces++;
    Keys keys(wsid);
    auto problem = [&, branch = branch](const std::string& what) {
      rep.problems.push_back(fmt::format("workspace of branch {}: {}", branch, what));
    };
    // Every record of the Workspace is read (a damaged table shows here), the entries kept to
    // name paths.
    std::map<Ino, std::pair<Ino, std::string>> up;
    const std::string ep = keys.prefix() + kTagEntry;
    Status all = kv.Scan(kv::Cf::kWorkspace, keys.prefix(), keys.End(), [&](auto k, auto v) {
      if (k.size() > ep.size() + 8 && k.compare(0, ep.size(), ep) == 0) {
        base::Reader r(v);
        uint64_t child = 0;
        if (r.Varint(&child)) up[child] = {Keys::InoAt(k, ep.size()), std::string(k.substr(ep.size() + 8))};
      }
      return true;
    }, snap.get());
    if (!all.ok()) {
      problem(fmt::format("records: {}", all.message()));
      continue;
    }
    const std::string rp = keys.RefPrefix();
    std::string buf;
    Status refs = kv.Scan(kv::Cf::kWorkspace, rp, history::PrefixEnd(rp), [&](auto k, auto v) {
      const Ino ino = Keys::InoAt(k, rp.size());
      const uint64_t blk = base::GetBigEndian64(k.data() + k.size() - 8);
      kv::DataRef ref;
      size_t used = 0;
      if (!kv::DataRef::DecodePrefix(v, &ref, &used) || ref.length > kBlockSize) {
        problem(fmt::format("{}: block {}: damaged data-log record", PathIn(up, ino), blk));
        return true;
      }
      rep.blocks++;
      buf.resize(ref.length);
      Status s = log.Read(ref, buf.data());
      if (!s.ok()) {
        problem(fmt::format("{}: bytes {}-{}: {}", PathIn(up, ino), blk * kBlockSize, blk * kBlockSize + ref.length,
                            s.message()));
      } else {
        rep.bytes += ref.length;
      }
      return true;
    }, snap.get());
    if (!refs.ok()) problem(fmt::format("data-log records: {}", refs.message()));
  }
  return rep;
}

}  // namespace layerfs::workspace
