#include "cli/json_shapes.h"

#include <array>

#include <fmt/format.h>

#include "cli/verb.h"
#include "merge/patch.h"
#include "workspace/files.h"

namespace layerfs::cli {

using nlohmann::json;

json CommitJson(const CommitInfo& c) {
  json parents = json::array();
  for (const auto& p : c.parents) parents.push_back(p.Hex());
  return {{"id", c.id.Hex()},         {"parents", parents},           {"root", c.root.Hex()},
          {"message", c.message},     {"time", c.time_sec},           {"time_nsec", c.time_nsec},
          {"logical_bytes", c.logical_bytes}, {"files", c.files}};
}

std::string ModeString(uint32_t mode) { return fmt::format("{:04o}", mode & 07777); }

json IdOrNull(const std::optional<ObjectId>& id) { return id ? json(id->Hex()) : json(nullptr); }

json EntryJson(const TreeEntry& e) {
  json j = {{"type", EntryTypeName(e.type)}, {"mode", ModeString(e.mode)}, {"size", e.size}};
  if (e.type == EntryType::kFile || e.type == EntryType::kDir) j["id"] = e.id.Hex();
  if (e.type == EntryType::kSymlink) j["target"] = e.target;
  return j;
}

json ChangeJson(const DiffEntry& d) {
  json j = {{"path", d.path}, {"change", std::string(1, d.change)}};
  if (d.change == 'R') {
    j["from_path"] = d.from_path;
    j["similarity"] = d.similarity;
  }
  if (d.before) j["before"] = EntryJson(*d.before);
  if (d.after) j["after"] = EntryJson(*d.after);
  return j;
}

json ChangesJson(const std::vector<DiffEntry>& d) {
  json arr = json::array();
  for (const auto& e : d) arr.push_back(ChangeJson(e));
  return arr;
}

json ConflictJson(const merge::Conflict& c) {
  auto side = [](const std::optional<TreeEntry>& e) -> json {
    if (!e) return nullptr;
    if (e->type == EntryType::kSymlink) return e->target;
    return e->id.Hex();
  };
  json sides = json::array();
  for (const auto& s : c.sides) sides.push_back(s);
  return {{"path", c.path},         {"kind", merge::ConflictKindName(c.kind)},
          {"base", side(c.base)},   {"ours", side(c.ours)},
          {"theirs", side(c.theirs)}, {"sides", sides}};
}

Status AddPatches(const std::vector<DiffEntry>& d, const SideReader& read, nlohmann::json* changes,
                  uint64_t* running_total) {
  uint64_t own = 0;
  uint64_t& total = running_total ? *running_total : own;
  for (size_t i = 0; i < d.size(); i++) {
    std::string before, after;
    if (d[i].before && merge::NeedsContent(*d[i].before)) {
      LFS_ASSIGN(before, read(d[i], false));
    }
    if (d[i].after && merge::NeedsContent(*d[i].after)) {
      LFS_ASSIGN(after, read(d[i], true));
    }
    std::string p = merge::UnifiedPatch(d[i], before, after);
    total += p.size();
    if (total > kMaxContent)
      return Status::Error(E2BIG, fmt::format("the patch is over {} MiB; name commits closer together, or leave out -p",
                                              kMaxContent >> 20));
    (*changes)[i]["patch"] = std::move(p);
  }
  return Status::Ok();
}

SideReader HistoryReader(Store& st) {
  return [&st](const DiffEntry& d, bool after) -> Result<std::string> {
    const TreeEntry& e = after ? *d.after : *d.before;
    if (e.type == EntryType::kSymlink) return e.target;
    return st.ReadFile(e);
  };
}

SideReader WorkingTreeReader(Store& st, workspace::Workspace& ws) {
  return [history = HistoryReader(st), &ws](const DiffEntry& d, bool after) -> Result<std::string> {
    if (!after) return history(d, false);
    if (d.after->type == EntryType::kSymlink) return d.after->target;
    uint64_t size = 0;
    return workspace::ReadPath(ws, d.path, 0, std::nullopt, &size);
  };
}

void PrintChanges(const nlohmann::json& d, bool stat, Output& o) {
  size_t counts[256] = {};
  for (const auto& e : d) {
    const std::string change = e["change"].get<std::string>();
    const std::string path = merge::GitQuote(e["path"].get<std::string>());
    const bool renamed = change == "R" && e.contains("from_path");
    const std::string from = renamed ? merge::GitQuote(e["from_path"].get<std::string>()) : "";
    counts[static_cast<unsigned char>(change[0])]++;
    if (stat) {
      int64_t before = e.contains("before") ? e["before"]["size"].get<int64_t>() : 0;
      int64_t after = e.contains("after") ? e["after"]["size"].get<int64_t>() : 0;
      const std::string shown = renamed ? from + " => " + path : path;
      o.Outf("{} {:<60} {:+} bytes\n", change, shown, after - before);
    } else if (renamed) {
      o.Outf("R{:03}\t{}\t{}\n", e["similarity"].get<int>(), from, path);
    } else {
      o.Outf("{}\t{}\n", change, path);
    }
  }
  if (stat)
    o.Outf("{} paths changed: {} added, {} removed, {} modified, {} type changed, {} attributes changed{}\n", d.size(),
           counts[int{'A'}], counts[int{'D'}], counts[int{'M'}], counts[int{'T'}], counts[int{'P'}],
           counts[int{'R'}] ? fmt::format(", {} renamed", counts[int{'R'}]) : "");
}

void PrintPatches(const nlohmann::json& changes, Output& o) {
  for (const auto& e : changes)
    if (e.contains("patch")) o.Out(e["patch"].get<std::string>());
}

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = p[i] << 16 | p[i + 1] << 8 | p[i + 2];
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (size_t rest = in.size() - i) {
    uint32_t v = p[i] << 16 | (rest == 2 ? p[i + 1] << 8 : 0);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view in) {
  static const auto table = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    for (int i = 0; i < 64; i++) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return Status::Invalid("bad base64: wrong length");
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    int8_t v = table[c];
    if (v < 0) return Status::Invalid("bad base64: a character outside the alphabet");
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace layerfs::cli
