// FindRenames and Similarity (merge/renames.h).
#include "merge/renames.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "history/file_content.h"
#include "merge/file_merge.h"

namespace layerfs::merge {

namespace {

constexpr uint32_t kMaxScore = 60000, kMinScore = kMaxScore / 2;

// Span hash -> bytes in spans with that hash, sorted by hash.
using Spans = std::vector<std::pair<uint32_t, uint64_t>>;

Spans HashSpans(std::string_view data) {
  constexpr uint32_t kHashBase = 107927;
  const bool text = !LooksBinary(data);
  std::unordered_map<uint32_t, uint64_t> counts;
  uint32_t a1 = 0, a2 = 0, n = 0;
  for (size_t i = 0; i < data.size(); i++) {
    const uint32_t c = static_cast<unsigned char>(data[i]);
    if (text && c == '\r' && i + 1 < data.size() && data[i + 1] == '\n') continue;
    const uint32_t old1 = a1;
    a1 = (a1 << 7) ^ (a2 >> 25);
    a2 = (a2 << 7) ^ (old1 >> 25);
    a1 += c;
    if (++n < 64 && c != '\n') continue;
    counts[(a1 + a2 * 0x61) % kHashBase] += n;
    n = a1 = a2 = 0;
  }
  if (n > 0) counts[(a1 + a2 * 0x61) % kHashBase] += n;
  Spans out(counts.begin(), counts.end());
  std::sort(out.begin(), out.end());
  return out;
}

// Score in 0..kMaxScore; 0 when the sizes alone rule out half.
uint32_t Score(uint64_t src_size, const Spans& src, uint64_t dst_size, const Spans& dst) {
  const uint64_t max_size = std::max(src_size, dst_size), min_size = std::min(src_size, dst_size);
  if (dst_size == 0 || max_size * (kMaxScore - kMinScore) < (max_size - min_size) * kMaxScore) return 0;
  uint64_t copied = 0;
  size_t i = 0, j = 0;
  while (i < src.size() && j < dst.size()) {
    if (src[i].first < dst[j].first) i++;
    else if (src[i].first > dst[j].first) j++;
    else copied += std::min(src[i++].second, dst[j++].second);
  }
  return static_cast<uint32_t>(copied * kMaxScore / max_size);
}

std::string_view BaseName(std::string_view p) {
  auto s = p.rfind('/');
  return s == std::string_view::npos ? p : p.substr(s + 1);
}

}  // namespace

int Similarity(std::string_view a, std::string_view b) {
  return static_cast<int>(Score(a.size(), HashSpans(a), b.size(), HashSpans(b)) * 100 / kMaxScore);
}

Result<std::vector<Rename>> FindRenames(Store& store, const ObjectId& base, const ObjectId& side, objects::Txn* txn,
                                        const std::set<std::string>* only_from) {
  if (base == side) return std::vector<Rename>{};
  LFS_ASSIGN(auto diff, store.DiffTrees(base, side, txn));
  return PairRenames(diff, [&](const DiffEntry& d, bool after) -> Result<std::string> {
    const TreeEntry& e = after ? *d.after : *d.before;
    return history::ReadContent(store.objects(), e.id, e.chunked, txn);
  }, only_from);
}

Result<std::vector<Rename>> PairRenames(const std::vector<DiffEntry>& diff, const ChangeContent& read,
                                        const std::set<std::string>* only_from) {
  std::vector<Rename> out;
  std::vector<const DiffEntry*> srcs, dsts;
  for (const auto& d : diff) {
    if (d.change == 'D' && d.before->type == EntryType::kFile && (!only_from || only_from->count(d.path))) srcs.push_back(&d);
    if (d.change == 'A' && d.after->type == EntryType::kFile) dsts.push_back(&d);
  }
  if (srcs.empty() || dsts.empty()) return out;
  std::vector<bool> src_used(srcs.size()), dst_used(dsts.size());
  auto pair = [&](size_t s, size_t d, int score) {
    src_used[s] = dst_used[d] = true;
    out.push_back({srcs[s]->path, dsts[d]->path, *srcs[s]->before, *dsts[d]->after, score});
  };
  // Identical content first: per destination, the first source with its content, one of the same
  // base name preferred.
  std::multimap<std::pair<ObjectId, bool>, size_t> by_content;
  for (size_t s = 0; s < srcs.size(); s++) by_content.emplace(std::pair{srcs[s]->before->id, srcs[s]->before->chunked}, s);
  for (size_t d = 0; d < dsts.size(); d++) {
    auto [lo, hi] = by_content.equal_range({dsts[d]->after->id, dsts[d]->after->chunked});
    std::optional<size_t> pick;
    for (auto it = lo; it != hi; ++it) {
      if (src_used[it->second]) continue;
      if (!pick) pick = it->second;
      if (BaseName(srcs[it->second]->path) == BaseName(dsts[d]->path)) {
        pick = it->second;
        break;
      }
    }
    if (pick) pair(*pick, d, 100);
  }
  // Then by similarity, best pairs first.
  std::vector<size_t> rs, rd;
  for (size_t s = 0; s < srcs.size(); s++)
    if (!src_used[s] && srcs[s]->before->size > 0 && srcs[s]->before->size <= kMaxSimilarityBytes) rs.push_back(s);
  for (size_t d = 0; d < dsts.size(); d++)
    if (!dst_used[d] && dsts[d]->after->size > 0 && dsts[d]->after->size <= kMaxSimilarityBytes) rd.push_back(d);
  if (!rs.empty() && !rd.empty() && rs.size() <= kMaxRenameCandidates && rd.size() <= kMaxRenameCandidates) {
    auto spans = [&](const DiffEntry& d, bool after) -> Result<Spans> {
      LFS_ASSIGN(std::string data, read(d, after));
      return HashSpans(data);
    };
    std::vector<Spans> ss(rs.size());
    for (size_t i = 0; i < rs.size(); i++) {
      LFS_ASSIGN(ss[i], spans(*srcs[rs[i]], false));
    }
    struct Candidate {
      uint32_t score;
      bool same_name;
      size_t d, s;
    };
    std::vector<Candidate> cands;
    for (size_t dj = 0; dj < rd.size(); dj++) {
      const TreeEntry& de = *dsts[rd[dj]]->after;
      std::optional<Spans> ds;
      for (size_t si = 0; si < rs.size(); si++) {
        const TreeEntry& se = *srcs[rs[si]]->before;
        const uint64_t mx = std::max(se.size, de.size), mn = std::min(se.size, de.size);
        if (mx * (kMaxScore - kMinScore) < (mx - mn) * kMaxScore) continue;  // sizes rule it out
        if (!ds) {
          LFS_ASSIGN(ds, spans(*dsts[rd[dj]], true));
        }
        uint32_t sc = Score(se.size, ss[si], de.size, *ds);
        if (sc >= kMinScore)
          cands.push_back({sc, BaseName(srcs[rs[si]]->path) == BaseName(dsts[rd[dj]]->path), rd[dj], rs[si]});
      }
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.score, a.same_name) > std::tie(b.score, b.same_name);
    });
    for (const auto& c : cands)
      if (!src_used[c.s] && !dst_used[c.d]) pair(c.s, c.d, static_cast<int>(c.score * 100 / kMaxScore));
  }
  std::sort(out.begin(), out.end(), [](const Rename& a, const Rename& b) { return a.from < b.from; });
  return out;
}

Status DetectRenames(std::vector<DiffEntry>* diff, const ChangeContent& read) {
  LFS_ASSIGN(auto renames, PairRenames(*diff, read));
  if (renames.empty()) return Status::Ok();
  std::unordered_map<std::string, const Rename*> by_to;
  std::set<std::string> from;
  for (const auto& r : renames) {
    by_to.emplace(r.to, &r);
    from.insert(r.from);
  }
  std::vector<DiffEntry> out;
  out.reserve(diff->size() - renames.size());
  for (auto& d : *diff) {
    if (d.change == 'D' && from.count(d.path)) continue;
    if (d.change == 'A') {
      if (auto it = by_to.find(d.path); it != by_to.end()) {
        const Rename& r = *it->second;
        DiffEntry e{r.to, 'R', r.before, r.after};
        e.from_path = r.from;
        e.similarity = r.score;
        out.push_back(std::move(e));
        continue;
      }
    }
    out.push_back(std::move(d));
  }
  *diff = std::move(out);
  return Status::Ok();
}

}  // namespace layerfs::merge
