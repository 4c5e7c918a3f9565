// JSON for strings that are bytes. A file name on Linux is any bytes but '/' and NUL, and LayerFS
// keeps names (and branch messages, symlink targets, error messages quoting them) as bytes; a JSON
// string is Unicode, and nlohmann::json throws when it dumps a string that is not UTF-8. Every
// JSON LayerFS writes or reads on the wire (the control protocol, `--json`, MCP, the front's
// request) goes through these two functions instead (docs/protocol.md, "Names that are not UTF-8"):
//
//  - Dump: a byte that is not part of a valid UTF-8 sequence (RFC 3629: no overlong forms, no
//    encoded surrogates, nothing past U+10FFFF) is written as the escape \udcXX, XX being the byte
//    (80..ff): a lone low surrogate, the convention of Python's `surrogateescape` (os.fsdecode), so
//    a Python client gets the name as the str its own os.listdir() would give and os.fsencode()
//    gives back the bytes. Valid UTF-8 is written as it is (control characters, '"' and '\'
//    escaped as nlohmann does). Never throws on string content. Same layout as json::dump
//    (indent < 0: one line; else that many spaces per level).
//  - Parse: as json::parse, but a lone \udcXX escape (XX 80..ff, not the second half of a
//    surrogate pair) in a string or key is read as the byte XX. While nlohmann parses, the
//    plane-16 private-use characters U+10FE80..U+10FEFF stand for those bytes; a text holding
//    such a character itself has it rewritten to its UTF-8 bytes' stand-ins first, and Dump
//    writes such a character as the \udcXX of its bytes, so every byte string goes through
//    whole and nothing is refused or misread.
//
// Stateless, thread-safe; header-only dependencies (the front links it: C and C++ runtimes only).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace layerfs::control {

std::string Dump(const nlohmann::json& j, int indent = -1);

// Throws nlohmann::json::parse_error (a json::exception) as json::parse does.
nlohmann::json Parse(std::string_view text);
// The non-throwing form: a discarded value (is_discarded()) when `text` is not a JSON value.
nlohmann::json ParseOrDiscarded(std::string_view text);

// Whether `s` is valid UTF-8 (RFC 3629).
bool ValidUtf8(std::string_view s);

}  // namespace layerfs::control
