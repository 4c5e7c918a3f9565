#include "history/similar_files.h"

#include <iterator>

#include "base/hash.h"

namespace layerfs::history {

bool SimilarFiles::Comparable(uint64_t a, uint64_t b) { return a <= 4 * b + 4096 && b <= 4 * a + 4096; }

std::string_view SimilarFiles::Extension(std::string_view name) {
  size_t dot = name.rfind('.');
  // A leading dot names a hidden file, not an extension.
  if (dot == std::string_view::npos || dot == 0) return {};
  return name.substr(dot);
}

void SimilarFiles::Add(uint64_t dir, std::string_view name, uint64_t size, bool chunked, uint64_t handle) {
  if (size == 0) return;
  Known k{size, chunked, handle};
  if (dir != 0) at_[{dir, std::string(name)}] = k;
  if (chunked) return;
  auto it = by_name_.find(name);
  if (it == by_name_.end()) it = by_name_.emplace(std::string(name), BySize{}).first;
  it->second.emplace(size, k);
  if (dir != 0) by_ext_[{dir, std::string(Extension(name))}].emplace(size, k);
}

std::optional<uint64_t> SimilarFiles::Nearest(const BySize& among, uint64_t size) {
  // The nearest size is one of the two neighbours of `size`; of those, a comparable one.
  std::optional<uint64_t> best;
  uint64_t best_gap = 0;
  auto consider = [&](BySize::const_iterator it) {
    if (it == among.end() || !Comparable(it->first, size)) return;
    uint64_t gap = it->first > size ? it->first - size : size - it->first;
    if (!best || gap < best_gap) {
      best = it->second.handle;
      best_gap = gap;
    }
  };
  auto above = among.lower_bound(size);
  consider(above);
  if (above != among.begin()) consider(std::prev(above));
  return best;
}

std::optional<uint64_t> SimilarFiles::Find(uint64_t dir, std::string_view name, uint64_t size, bool chunked) const {
  if (size == 0) return std::nullopt;
  if (auto it = at_.find({dir, std::string(name)}); it != at_.end() && it->second.chunked == chunked)
    return it->second.handle;
  if (chunked) return std::nullopt;
  if (auto it = by_name_.find(name); it != by_name_.end())
    if (auto h = Nearest(it->second, size)) return h;
  if (auto it = by_ext_.find({dir, std::string(Extension(name))}); it != by_ext_.end())
    if (auto h = Nearest(it->second, size)) return h;
  return std::nullopt;
}

uint64_t SimilarTrees::Shape(const std::vector<TreeEntry>& entries) {
  std::string names;
  for (const auto& e : entries) {
    names.push_back(static_cast<char>(e.type));
    names.append(e.name);
    names.push_back('\0');  // names hold no NUL: (type, name) pairs cannot run together
  }
  return base::Hash64(names);
}

std::optional<ObjectId> SimilarTrees::Find(const std::vector<TreeEntry>& entries) const {
  if (entries.empty()) return std::nullopt;
  auto it = by_shape_.find(Shape(entries));
  if (it == by_shape_.end() || it->second.hops >= kMaxHops) return std::nullopt;
  return it->second.id;
}

void SimilarTrees::Add(const std::vector<TreeEntry>& entries, const ObjectId& id, const std::optional<ObjectId>& base) {
  if (entries.empty()) return;
  uint32_t hops = 0;
  if (base)
    if (auto it = hops_.find(*base); it != hops_.end()) hops = it->second + 1;
  hops_.try_emplace(id, hops);
  by_shape_[Shape(entries)] = Last{id, hops};
}

}  // namespace layerfs::history
