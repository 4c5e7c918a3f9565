#include "history/similar_files.h"

#include <iterator>

namespace layerfs::history {

bool SimilarFiles::Comparable(uint64_t a, uint64_t b) { return a <= 4 * b + 4096 && b <= 4 * a + 4096; }

std::string_view SimilarFiles::Extension(std::string_view name) {
  size_t dot = name.rfind('.');
  // A leading dot names a hidden file, not an extension.
  if (dot == std::string_view::npos || dot == 0) return {};
  return name.substr(dot);
}

void SimilarFiles::Add(uint64_t dir, std::string_view name, const TreeEntry& file) {
  if (file.type != EntryType::kFile || file.id.IsZero()) return;
  Known k{file.size, file.id, file.chunked};
  at_[{dir, std::string(name)}] = k;
  if (file.chunked) return;
  auto it = by_name_.find(name);
  if (it == by_name_.end()) it = by_name_.emplace(std::string(name), BySize{}).first;
  it->second.emplace(k.size, k);
  by_ext_[{dir, std::string(Extension(name))}].emplace(k.size, k);
}

std::optional<TreeEntry> SimilarFiles::Nearest(const BySize& among, uint64_t size) {
  // The nearest size is one of the two neighbours of `size`; of those, a comparable one.
  const Known* best = nullptr;
  auto consider = [&](BySize::const_iterator it) {
    if (it == among.end() || !Comparable(it->first, size)) return;
    uint64_t gap = it->first > size ? it->first - size : size - it->first;
    uint64_t best_gap = best ? (best->size > size ? best->size - size : size - best->size) : 0;
    if (!best || gap < best_gap) best = &it->second;
  };
  auto above = among.lower_bound(size);
  consider(above);
  if (above != among.begin()) consider(std::prev(above));
  if (!best) return std::nullopt;
  TreeEntry e;
  e.size = best->size;
  e.id = best->id;
  e.chunked = false;
  return e;
}

std::optional<TreeEntry> SimilarFiles::Find(uint64_t dir, std::string_view name, uint64_t size,
                                            bool chunked) const {
  if (size == 0) return std::nullopt;
  if (auto it = at_.find({dir, std::string(name)}); it != at_.end() && it->second.chunked == chunked) {
    TreeEntry e;
    e.size = it->second.size;
    e.id = it->second.id;
    e.chunked = it->second.chunked;
    return e;
  }
  if (chunked) return std::nullopt;
  if (auto it = by_name_.find(name); it != by_name_.end())
    if (auto e = Nearest(it->second, size)) return e;
  if (auto it = by_ext_.find({dir, std::string(Extension(name))}); it != by_ext_.end())
    if (auto e = Nearest(it->second, size)) return e;
  return std::nullopt;
}

}  // namespace layerfs::history
