// JSON for strings that are bytes (json_bytes.h).
#include "control/json_bytes.h"

#include <cstdint>

namespace layerfs::control {

using nlohmann::json;

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (RFC 3629), 0 when there is none.
size_t Utf8Len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  const size_t left = s.size() - i;
  const auto cont = [&](size_t k) { return (b(i + k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // a surrogate, encoded
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

constexpr char kHex[] = "0123456789abcdef";

// The UTF-8 of U+10FE80..U+10FEFF, the stand-ins for bytes 80..ff while nlohmann parses:
// F4 8F BA 80..BF (bytes 80..bf), F4 8F BB 80..BF (bytes c0..ff).
bool IsStandIn(std::string_view s, size_t i) {
  return i + 3 < s.size() && static_cast<uint8_t>(s[i]) == 0xF4 && static_cast<uint8_t>(s[i + 1]) == 0x8F &&
         (static_cast<uint8_t>(s[i + 2]) == 0xBA || static_cast<uint8_t>(s[i + 2]) == 0xBB) &&
         (static_cast<uint8_t>(s[i + 3]) & 0xC0) == 0x80;
}

void DumpString(std::string_view s, std::string& out) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    // A byte of no valid sequence, or of a character that stands for bytes while a message is
    // parsed (U+10FE80..U+10FEFF): \udcXX.
    const size_t n = IsStandIn(s, i) ? 0 : Utf8Len(s, i);
    if (n == 0) {
      out += "\\udc";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
      i++;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    i++;
  }
  out.push_back('"');
}

void Newline(std::string& out, int indent, int level) {
  out.push_back('\n');
  out.append(static_cast<size_t>(indent) * level, ' ');
}

void DumpValue(const json& j, int indent, int level, std::string& out) {
  switch (j.type()) {
    case json::value_t::string:
      DumpString(j.get_ref<const std::string&>(), out);
      return;
    case json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      out.push_back('{');
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out.push_back(',');
        first = false;
        if (indent >= 0) Newline(out, indent, level + 1);
        DumpString(it.key(), out);
        out += indent >= 0 ? ": " : ":";
        DumpValue(it.value(), indent, level + 1, out);
      }
      if (indent >= 0) Newline(out, indent, level);
      out.push_back('}');
      return;
    }
    case json::value_t::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      bool first = true;
      for (const auto& e : j) {
        if (!first) out.push_back(',');
        first = false;
        if (indent >= 0) Newline(out, indent, level + 1);
        DumpValue(e, indent, level + 1, out);
      }
      if (indent >= 0) Newline(out, indent, level);
      out.push_back(']');
      return;
    }
    default:  // numbers, booleans, null (and binary, which LayerFS never builds)
      out += j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
unsigned HexVal(char c) {
  return c <= '9' ? static_cast<unsigned>(c - '0') : static_cast<unsigned>((c | 0x20) - 'a' + 10);
}

// The stand-in of byte b (80..ff) in a prepared text: the escaped surrogate pair of U+10FE00+b.
void AppendStandIn(uint8_t b, std::string* out) {
  out->append("\\udbff\\ude");
  out->push_back(kHex[b >> 4]);
  out->push_back(kHex[b & 15]);
}

unsigned Escape4(std::string_view text, size_t i) {  // the \uXXXX at text[i], or 0x10000 if none
  if (i + 5 >= text.size() || text[i] != '\\' || text[i + 1] != 'u' || !IsHex(text[i + 2]) || !IsHex(text[i + 3]) ||
      !IsHex(text[i + 4]) || !IsHex(text[i + 5]))
    return 0x10000;
  return HexVal(text[i + 2]) << 12 | HexVal(text[i + 3]) << 8 | HexVal(text[i + 4]) << 4 | HexVal(text[i + 5]);
}

// Rewrites each lone \udcXX escape (XX 80..ff) to the stand-in of byte XX, and each stand-in
// character the text itself holds (raw, or as an escaped pair) to the stand-ins of its four UTF-8
// bytes, so that Restore gives every one of them back as bytes. Returns false when there was
// nothing to rewrite (the text is parsed as it is).
bool Prepare(std::string_view text, std::string* out) {
  bool changed = false;
  bool in_string = false;
  bool after_high = false;  // the escape just read was \uD800..\uDBFF
  size_t copied = 0;
  auto replace = [&](size_t at, size_t len) {
    if (!changed) out->reserve(text.size() + 64);
    changed = true;
    out->append(text.substr(copied, at - copied));
    copied = at + len;
  };
  for (size_t i = 0; i < text.size(); i++) {
    const char c = text[i];
    if (!in_string) {
      if (c == '"') in_string = true;
      continue;
    }
    if (c == '"') {
      in_string = false;
      after_high = false;
      continue;
    }
    if (IsStandIn(text, i)) {
      replace(i, 4);
      for (size_t k = 0; k < 4; k++) AppendStandIn(static_cast<uint8_t>(text[i + k]), out);
      i += 3;
      after_high = false;
      continue;
    }
    if (c != '\\' || i + 1 >= text.size()) {
      after_high = false;
      continue;
    }
    if (text[i + 1] != 'u') {
      i++;  // a two-character escape: skip its second character (it may be '"' or '\\')
      after_high = false;
      continue;
    }
    const unsigned u = Escape4(text, i);
    if (u == 0x10000) {
      after_high = false;
      continue;  // malformed: the parser reports it
    }
    if (!after_high && u == 0xDBFF) {
      const unsigned low = Escape4(text, i + 6);
      if (low >= 0xDE80 && low <= 0xDEFF) {  // U+10FE80..U+10FEFF, escaped: its UTF-8 bytes
        const unsigned cp = 0x10FE00 + (low - 0xDE00);
        replace(i, 12);
        AppendStandIn(0xF4, out);
        AppendStandIn(0x8F, out);
        AppendStandIn(static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)), out);
        AppendStandIn(static_cast<uint8_t>(0x80 | (cp & 0x3F)), out);
        i += 11;
        continue;
      }
    }
    if (!after_high && u >= 0xDC80 && u <= 0xDCFF) {
      replace(i, 6);
      AppendStandIn(static_cast<uint8_t>(u & 0xFF), out);
      i += 5;
      continue;
    }
    after_high = !after_high && u >= 0xD800 && u <= 0xDBFF;
    i += 5;
  }
  if (changed) out->append(text.substr(copied));
  return changed;
}

std::string Restore(const std::string& s) {
  std::string r;
  r.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (IsStandIn(s, i)) {
      const auto third = static_cast<uint8_t>(s[i + 2]), fourth = static_cast<uint8_t>(s[i + 3]);
      r.push_back(static_cast<char>(0x80 + (third == 0xBB ? 0x40 : 0) + (fourth & 0x3F)));
      i += 4;
    } else {
      r.push_back(s[i++]);
    }
  }
  return r;
}

void RestoreAll(json& j) {
  if (j.is_string()) {
    j = Restore(j.get_ref<const std::string&>());
  } else if (j.is_array()) {
    for (auto& e : j) RestoreAll(e);
  } else if (j.is_object()) {
    json o = json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      json v = std::move(it.value());
      RestoreAll(v);
      o[Restore(it.key())] = std::move(v);
    }
    j = std::move(o);
  }
}

}  // namespace

bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string Dump(const json& j, int indent) {
  std::string out;
  DumpValue(j, indent, 0, out);
  return out;
}

json Parse(std::string_view text) {
  std::string prepared;
  if (!Prepare(text, &prepared)) return json::parse(text);
  json j = json::parse(prepared);
  RestoreAll(j);
  return j;
}

json ParseOrDiscarded(std::string_view text) {
  try {
    return Parse(text);
  } catch (const json::exception&) {
    return json(json::value_t::discarded);
  }
}

}  // namespace layerfs::control
