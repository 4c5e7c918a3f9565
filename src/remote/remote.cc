#include "remote/remote.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "base/coding.h"
#include "history/keys.h"
#include "history/store_impl.h"
#include "kv/kv.h"
#include "remote/catalog_keys.h"

namespace layerfs::remote {

namespace {

constexpr std::string_view kIndexDir = "index/";
constexpr std::string_view kPackDir = "pack/";
constexpr std::string_view kHeadsDir = "refs/heads/";

// Catalog refreshes of every remote of every Store in this process, one at a time: two
// refreshes of one remote must not number one pack twice.
std::mutex g_refresh_mu;

Result<ObjectId> ParseRefValue(const std::string& where, std::string_view v) {
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  auto id = ObjectId::FromHex(v);
  if (!id) return Status::Corrupt(fmt::format("{}: damaged ref (not a commit id)", where));
  return *id;
}

}  // namespace

std::string NewPackName() {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch()).count();
  return fmt::format("{:012x}-{}", static_cast<uint64_t>(ms) & 0xffffffffffffull, RandomHex(16));
}

bool ValidPackName(std::string_view n) {
  if (n.size() != 29 || n[12] != '-') return false;
  for (size_t i = 0; i < n.size(); i++)
    if (i != 12 && !isxdigit(static_cast<unsigned char>(n[i]))) return false;
  return true;
}

Result<std::unique_ptr<Remote>> Remote::Open(Store& store, const std::string& name) {
  LFS_ASSIGN(RemoteInfo info, GetRemote(store, name));
  return Open(store, info);
}

Result<std::unique_ptr<Remote>> Remote::Open(Store& store, const RemoteInfo& info) {
  LFS_ASSIGN(auto t, Connect(info.url));
  return std::unique_ptr<Remote>(new Remote(store, info, std::move(t)));
}

Result<std::optional<RemoteConfig>> Remote::ReadConfig() {
  auto data = t_->Get("config");
  if (!data.ok()) {
    if (data.status().code() == ENOENT) return std::optional<RemoteConfig>();
    return data.status();
  }
  auto c = DecodeRemoteConfig(*data);
  if (!c.ok()) return c.status().Context(fmt::format("remote '{}' ({})", info_.name, t_->url()));
  return std::optional<RemoteConfig>(std::move(*c));
}

Result<bool> Remote::Attach(bool create) {
  LFS_ASSIGN(auto cfg, ReadConfig());
  if (!cfg) {
    if (!create) return false;
    RemoteConfig c;
    c.id = RandomHex(32);
    c.seed = store_.seed();
    c.policy = store_.policy();
    c.created = history::NowNanos() / 1000000000;
    Status s = t_->PutIfAbsent("config", EncodeRemoteConfig(c));
    if (!s.ok() && s.code() != EEXIST) return s;
    LFS_ASSIGN(cfg, ReadConfig());  // ours, or the one a racing first push wrote
    if (!cfg) return Status::Corrupt(fmt::format("remote {}: config vanished after it was written", t_->url()));
  }
  if (cfg->seed != store_.seed())
    return Status::Error(kDiverged, fmt::format("remote '{}' ({}) holds another history (its id key differs from "
                                                "this Store's); clone it into a new Store instead",
                                                info_.name, t_->url()));
  if (cfg->id != info_.remote_id && !info_.name.empty()) {
    kv::Batch b;
    if (!info_.remote_id.empty()) {
      // Recreated under the same URL: what we knew of the old one is wrong for this one.
      std::string rrefs = history::RemoteRefKey(info_.name, "");
      b.DeleteRange(kv::Cf::kMeta, rrefs, history::PrefixEnd(rrefs));
      for (const std::string& p : CatalogPrefixes(info_.name))
        b.DeleteRange(kv::Cf::kIndex, p, history::PrefixEnd(p));
      std::lock_guard l(mu_);
      names_.clear();
    }
    info_.remote_id = cfg->id;
    LFS_TRY(PutRemote(store_, info_, &b));
    LFS_TRY(store_.kv().Write(b, true));
  }
  return true;
}

Result<std::map<std::string, BranchHead>> Remote::Branches() {
  std::map<std::string, BranchHead> out;
  LFS_ASSIGN(auto keys, t_->List(kHeadsDir));
  for (const auto& k : keys) {
    std::string branch = k.substr(kHeadsDir.size());
    if (!history::ValidBranchName(branch)) continue;  // not one of ours to name locally
    LFS_ASSIGN(auto h, Branch(branch));
    if (h) out[branch] = std::move(*h);
  }
  return out;
}

Result<std::optional<BranchHead>> Remote::Branch(const std::string& branch) {
  std::string key = std::string(kHeadsDir) + branch;
  LFS_ASSIGN(auto ref, t_->GetRef(key));
  if (!ref) return std::optional<BranchHead>();
  LFS_ASSIGN(ObjectId id, ParseRefValue(fmt::format("remote {}: {}", t_->url(), key), ref->value));
  return std::optional<BranchHead>(BranchHead{id, ref->token});
}

Result<std::string> Remote::SetBranch(const std::string& branch, const ObjectId& id,
                                      const std::optional<std::string>& token) {
  return t_->CasRef(std::string(kHeadsDir) + branch, id.Hex() + "\n", token);
}

Result<uint32_t> Remote::NextPackNumber() {
  std::string begin = PackNumberKey(info_.name, 0);
  begin.resize(begin.size() - 4);
  uint32_t next = 1;
  LFS_TRY(store_.kv().Scan(kv::Cf::kIndex, begin, history::PrefixEnd(begin), [&](auto k, auto) {
    if (k.size() == begin.size() + 4) {
      uint32_t n = 0;
      for (size_t i = begin.size(); i < k.size(); i++) n = n << 8 | static_cast<uint8_t>(k[i]);
      next = std::max<uint32_t>(next, n + 1);
    }
    return true;
  }));
  return next;
}

Result<std::string> Remote::PackName(uint32_t number) {
  {
    std::lock_guard l(mu_);
    if (auto it = names_.find(number); it != names_.end()) return it->second;
  }
  LFS_ASSIGN(auto v, store_.kv().Get(kv::Cf::kIndex, PackNumberKey(info_.name, number)));
  base::Reader r(v ? std::string_view(*v) : std::string_view());
  std::string_view name;
  if (!v || !r.Bytes(&name)) return Status::Corrupt(fmt::format("remote '{}': catalog lost pack {}", info_.name, number));
  std::lock_guard l(mu_);
  names_[number] = std::string(name);
  return std::string(name);
}

Status Remote::Ingest(const std::string& pack, std::string_view raw_index, uint32_t number, kv::Batch* b) {
  auto index = DecodeIndex(raw_index);
  if (!index.ok()) return index.status().Context(fmt::format("remote {}: index/{}", t_->url(), pack));
  std::string pv;
  base::PutVarint(&pv, number);
  base::PutVarint(&pv, 0);
  b->Put(kv::Cf::kIndex, PackKey(info_.name, pack), pv);
  std::string nv;
  base::PutBytes(&nv, pack);
  nv.append(raw_index);
  b->Put(kv::Cf::kIndex, PackNumberKey(info_.name, number), nv);
  for (const auto& e : index->entries)
    b->Put(kv::Cf::kIndex, LocationKey(info_.name, e.cf(), e.id), EncodeLocation(number, e));
  return Status::Ok();
}

Status Remote::Refresh(uint64_t* indexes, uint64_t* bytes) {
  std::lock_guard rl(g_refresh_mu);
  LFS_ASSIGN(auto keys, t_->List(kIndexDir));
  std::set<std::string> listed;
  for (const auto& k : keys) {
    std::string n = k.substr(kIndexDir.size());
    if (ValidPackName(n)) listed.insert(n);
  }
  std::map<std::string, uint32_t> known;
  std::string begin = PackKey(info_.name, "");
  LFS_TRY(store_.kv().Scan(kv::Cf::kIndex, begin, history::PrefixEnd(begin), [&](auto k, auto v) {
    base::Reader r(v);
    uint64_t n = 0;
    (void)r.Varint(&n);
    known[std::string(k.substr(begin.size()))] = static_cast<uint32_t>(n);
    return true;
  }));
  LFS_ASSIGN(uint32_t next, NextPackNumber());
  for (const auto& name : listed) {
    if (known.count(name)) continue;
    auto raw = t_->Get(std::string(kIndexDir) + name);
    if (!raw.ok()) {
      if (raw.status().code() == ENOENT) continue;  // deleted between list and get
      return raw.status();
    }
    if (indexes) (*indexes)++;
    if (bytes) *bytes += raw->size();
    kv::Batch b;
    LFS_TRY(Ingest(name, *raw, next++, &b));
    LFS_TRY(store_.kv().Write(b, false));
  }
  // Indexes that vanished (a remote repacked or damaged): their records are not there any more.
  for (const auto& [name, number] : known) {
    if (listed.count(name)) continue;
    kv::Batch b;
    LFS_ASSIGN(auto v, store_.kv().Get(kv::Cf::kIndex, PackNumberKey(info_.name, number)));
    if (v) {
      base::Reader r(*v);
      std::string_view pn;
      if (r.Bytes(&pn)) {
        auto index = DecodeIndex(r.Rest());
        for (const auto& e : index.ok() ? index->entries : std::vector<IndexEntry>{}) {
          std::string lk = LocationKey(info_.name, e.cf(), e.id);
          LFS_ASSIGN(auto loc, store_.kv().Get(kv::Cf::kIndex, lk));
          uint32_t at = 0;
          if (loc && DecodeLocation(*loc, &at).ok() && at == number) b.Delete(kv::Cf::kIndex, lk);
        }
      }
    }
    b.Delete(kv::Cf::kIndex, PackKey(info_.name, name));
    b.Delete(kv::Cf::kIndex, PackNumberKey(info_.name, number));
    LFS_TRY(store_.kv().Write(b, false));
    std::lock_guard l(mu_);
    names_.erase(number);
  }
  std::lock_guard l(mu_);
  last_refresh_ = std::chrono::steady_clock::now();
  return Status::Ok();
}

Status Remote::RefreshAtMostEvery(std::chrono::milliseconds interval) {
  {
    std::lock_guard l(mu_);
    if (last_refresh_ && std::chrono::steady_clock::now() - *last_refresh_ < interval) return Status::Ok();
  }
  return Refresh();
}

Result<std::optional<Located>> Remote::Lookup(kv::Cf cf, const ObjectId& id) {
  LFS_ASSIGN(auto v, store_.kv().Get(kv::Cf::kIndex, LocationKey(info_.name, cf, id)));
  if (!v) return std::optional<Located>();
  Located loc;
  LFS_ASSIGN(loc.entry, DecodeLocation(*v, &loc.pack_number));
  loc.entry.id = id;
  if (loc.entry.cf() != cf) return Status::Corrupt(fmt::format("remote '{}': catalog entry of another family", info_.name));
  LFS_ASSIGN(loc.pack, PackName(loc.pack_number));
  return std::optional<Located>(std::move(loc));
}

Result<uint64_t> Remote::FetchMark() {
  LFS_ASSIGN(auto ev, store_.kv().Get(kv::Cf::kMeta, history::kGcEpochKey));
  uint64_t epoch = 0;
  if (ev && ev->size() == 8) {
    base::Reader r(*ev);
    (void)r.Fixed64(&epoch);
  }
  return epoch + 1;
}

Result<std::vector<Remote::Pack>> Remote::Packs() {
  LFS_ASSIGN(uint64_t mark, FetchMark());
  std::vector<Pack> out;
  std::string begin = PackKey(info_.name, "");
  LFS_TRY(store_.kv().Scan(kv::Cf::kIndex, begin, history::PrefixEnd(begin), [&](auto k, auto v) {
    base::Reader r(v);
    uint64_t n = 0, fetched = 0;
    (void)r.Varint(&n);
    (void)r.Varint(&fetched);
    out.push_back({std::string(k.substr(begin.size())), static_cast<uint32_t>(n), fetched == mark});
    return true;
  }));
  return out;  // by name: roughly the order they were written in
}

Result<PackIndex> Remote::IndexOf(const Pack& p) {
  LFS_ASSIGN(auto v, store_.kv().Get(kv::Cf::kIndex, PackNumberKey(info_.name, p.number)));
  base::Reader r(v ? std::string_view(*v) : std::string_view());
  std::string_view name;
  if (!v || !r.Bytes(&name)) return Status::Corrupt(fmt::format("remote '{}': catalog lost pack {}", info_.name, p.name));
  return DecodeIndex(r.Rest());
}

Status Remote::MarkFetched(const std::vector<Pack>& packs, kv::Batch* b) {
  LFS_ASSIGN(uint64_t mark, FetchMark());
  for (const auto& p : packs) {
    std::string pv;
    base::PutVarint(&pv, p.number);
    base::PutVarint(&pv, mark);
    b->Put(kv::Cf::kIndex, PackKey(info_.name, p.name), pv);
  }
  return Status::Ok();
}

Status Remote::ReadRecords(const std::vector<Located>& wanted, std::vector<std::string>* records, uint64_t* bytes) {
  // Plan: one range per distinct frame; frames of one pack merged when at most 64 KiB apart
  // (one request instead of several), up to 16 MiB per range.
  struct Frame {
    std::string pack;
    uint64_t offset, length;
    size_t read = 0;  // index into reads
  };
  std::map<std::pair<std::string, uint64_t>, Frame> frames;
  for (const auto& w : wanted) {
    ByteRange r = RangeFor(w.entry);
    frames.try_emplace({w.pack, r.offset}, Frame{w.pack, r.offset, r.length});
  }
  std::vector<RangeRead> reads;
  for (auto& [key, f] : frames) {
    if (!reads.empty()) {
      RangeRead& last = reads.back();
      uint64_t end = last.offset + last.length;
      if (last.key == std::string(kPackDir) + f.pack && f.offset >= end && f.offset - end <= (64u << 10) &&
          f.offset + f.length - last.offset <= (16u << 20)) {
        last.length = f.offset + f.length - last.offset;
        f.read = reads.size() - 1;
        continue;
      }
    }
    RangeRead r;
    r.key = std::string(kPackDir) + f.pack;
    r.offset = f.offset;
    r.length = f.length;
    f.read = reads.size();
    reads.push_back(std::move(r));
  }
  if (!reads.empty()) LFS_TRY(t_->ReadRanges(&reads));
  if (bytes)
    for (const auto& r : reads) *bytes += r.data.size();
  // Decode each frame once.
  std::map<std::pair<std::string, uint64_t>, std::string> decoded;
  records->clear();
  records->reserve(wanted.size());
  for (const auto& w : wanted) {
    std::pair<std::string, uint64_t> key{w.pack, w.entry.frame_offset};
    auto it = decoded.find(key);
    if (it == decoded.end()) {
      const Frame& f = frames.at(key);
      const RangeRead& r = reads[f.read];
      uint64_t at = f.offset - r.offset;
      std::string_view bytes_of = at <= r.data.size() ? std::string_view(r.data).substr(at, f.length) : std::string_view();
      auto frame = DecodeFrame(w.entry, bytes_of);
      if (!frame.ok()) return frame.status().Context(fmt::format("remote {}: {}", t_->url(), r.key));
      it = decoded.emplace(key, std::move(*frame)).first;
    }
    auto rec = RecordFromFrame(w.entry, it->second);
    if (!rec.ok()) return rec.status().Context(fmt::format("remote {}: pack/{}: {}", t_->url(), w.pack, w.entry.id.Hex()));
    records->push_back(std::move(*rec));
  }
  return Status::Ok();
}

Result<uint64_t> Remote::PutPack(const std::string& pack, const std::string& index) {
  std::string name = NewPackName();
  LFS_TRY(t_->PutIfAbsent(std::string(kPackDir) + name, pack));
  LFS_TRY(t_->PutIfAbsent(std::string(kIndexDir) + name, index));
  std::lock_guard rl(g_refresh_mu);
  LFS_ASSIGN(uint32_t number, NextPackNumber());
  kv::Batch b;
  LFS_TRY(Ingest(name, index, number, &b));
  LFS_TRY(store_.kv().Write(b, false));
  return uint64_t{pack.size() + index.size()};
}

}  // namespace layerfs::remote
