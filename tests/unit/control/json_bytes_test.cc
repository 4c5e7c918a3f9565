#include "control/json_bytes.h"

#include <gtest/gtest.h>

#include <random>

namespace layerfs::control {
namespace {

using nlohmann::json;

json Sample() {
  return {{"a", 1},
          {"b", json::array({1, 2.5, -3, true, nullptr, "x"})},
          {"empty_o", json::object()},
          {"empty_a", json::array()},
          {"nested", {{"k", {{"deep", json::array({json::object(), json::array()})}}}}},
          {"text", "tab\there \"quoted\" back\\slash nl\n cr\r bell\x07 del\x7f /slash \xc3\xbc\xf0\x9f\x98\x80"},
          {"big", 18446744073709551615ull},
          {"neg", -9223372036854775807ll},
          {"float", 0.1}};
}

TEST(JsonBytes, ValidUtf8IsDumpedAsNlohmannDoes) {
  const json j = Sample();
  EXPECT_EQ(Dump(j), j.dump());
  EXPECT_EQ(Dump(j, 2), j.dump(2));
  EXPECT_EQ(Dump(j, 4), j.dump(4));
  EXPECT_EQ(Dump(json("")), "\"\"");
  EXPECT_EQ(Dump(json(nullptr)), "null");
}

TEST(JsonBytes, EachByteOfNoValidSequenceIsALoneLowSurrogate) {
  for (int b = 0x80; b <= 0xFF; b++) {
    const std::string s = std::string("a") + static_cast<char>(b) + "z";
    char want[32];
    snprintf(want, sizeof want, "\"a\\udc%02xz\"", b);
    EXPECT_EQ(Dump(json(s)), want) << b;
  }
  // Overlong, an encoded surrogate, past U+10FFFF, cut short: byte by byte, as surrogateescape.
  EXPECT_EQ(Dump(json("\xc0\xaf")), "\"\\udcc0\\udcaf\"");
  EXPECT_EQ(Dump(json("\xed\xa0\x80")), "\"\\udced\\udca0\\udc80\"");
  EXPECT_EQ(Dump(json("\xf4\x90\x80\x80")), "\"\\udcf4\\udc90\\udc80\\udc80\"");
  EXPECT_EQ(Dump(json("\xe2\x82" "A")), "\"\\udce2\\udc82A\"");
  // A valid sequence after an invalid byte is kept whole.
  EXPECT_EQ(Dump(json("\xff\xc3\xbc")), "\"\\udcff\xc3\xbc\"");
  // Keys too.
  EXPECT_EQ(Dump(json{{"k\xff", 1}}), "{\"k\\udcff\":1}");
  EXPECT_FALSE(ValidUtf8("\xed\xa0\x80"));
  EXPECT_TRUE(ValidUtf8("\xf4\x8f\xbf\xbf"));
}

TEST(JsonBytes, AnyBytesComeBackThroughParse) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; round++) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 128 : 0x80 + rng() % 128);
    if (rng() % 3 == 0) s.insert(rng() % (s.size() + 1), "\xf4\x8f\xba\x80");
    std::string key(rng() % 6, '\0');
    for (char& c : key) c = static_cast<char>(rng() % 256);
    const json j = {{"v", s}, {key, json::array({s, 1})}};
    const std::string text = Dump(j, round % 2 ? 2 : -1);
    ASSERT_TRUE(ValidUtf8(text)) << text;
    // nlohmann itself refuses lone surrogates; Parse reads them as the bytes.
    const json back = Parse(text);
    ASSERT_EQ(back, j) << text;
  }
}

TEST(JsonBytes, ParseLeavesEverythingElseToJson) {
  // A surrogate pair whose low half is in dc80..dcff is a character, not a byte.
  EXPECT_EQ(Parse("\"\\ud83d\\udcff\"").get<std::string>(), "\xf0\x9f\x93\xbf");
  // An escaped backslash before "udcff" is text.
  EXPECT_EQ(Parse("\"\\\\udcff\"").get<std::string>(), "\\udcff");
  EXPECT_EQ(Parse("\"\\\"\\udcff\"").get<std::string>(), "\"\xff");
  // Upper-case hex digits are escapes as well.
  EXPECT_EQ(Parse("\"\\uDCFF\\udc80\"").get<std::string>(), "\xff\x80");
  // Lone surrogates that are not bytes stay errors, as malformed JSON does.
  EXPECT_THROW(Parse("\"\\udc41\""), json::parse_error);
  EXPECT_THROW(Parse("\"\\ud800\""), json::parse_error);
  EXPECT_THROW(Parse("{\"a\":"), json::parse_error);
  EXPECT_TRUE(ParseOrDiscarded("{\"a\":").is_discarded());
  EXPECT_EQ(ParseOrDiscarded("{\"a\":\"\\udcfe\"}"), json({{"a", "\xfe"}}));
  // Keys are read the same way; numbers and structure are untouched.
  const json want = json::array({1, "\xff", json::object({{"\xc3\xbc", 2}})});
  EXPECT_EQ(Parse("[1, \"\\udcff\", {\"\\udcc3\\udcbc\": 2}]"), want);
}

TEST(JsonBytes, TheStandInCharactersGoThroughAsTheirBytes) {
  // U+10FE80..U+10FEFF stand for bytes while nlohmann parses; the characters themselves, raw or
  // as an escaped pair, are read as their UTF-8 and never taken for the bytes they stand for.
  EXPECT_EQ(Parse("\"\xf4\x8f\xba\x80\"").get<std::string>(), "\xf4\x8f\xba\x80");
  EXPECT_EQ(Parse("\"\\udbff\\ude80\"").get<std::string>(), "\xf4\x8f\xba\x80");
  EXPECT_EQ(Parse("\"\\uDBFF\\uDEFF\"").get<std::string>(), "\xf4\x8f\xbb\xbf");
  EXPECT_EQ(Parse("\"a\xf4\x8f\xbb\xbf\\udcffb\"").get<std::string>(), "a\xf4\x8f\xbb\xbf\xff" "b");
  // Dump writes them as the escapes of their bytes, which Parse reads back.
  EXPECT_EQ(Dump(json("\xf4\x8f\xba\x80")), "\"\\udcf4\\udc8f\\udcba\\udc80\"");
  EXPECT_EQ(Parse(Dump(json("\xf4\x8f\xba\x80"))).get<std::string>(), "\xf4\x8f\xba\x80");
  // Their neighbours are ordinary characters.
  EXPECT_EQ(Parse("\"\\udbff\\ude7f\"").get<std::string>(), "\xf4\x8f\xb9\xbf");
  EXPECT_EQ(Parse("\"\\udbff\\udf00\"").get<std::string>(), "\xf4\x8f\xbc\x80");
  EXPECT_EQ(Parse("\"\xf4\x8f\xbf\xbf\"").get<std::string>(), "\xf4\x8f\xbf\xbf");
  EXPECT_EQ(Dump(json("\xf4\x8f\xbf\xbf")), "\"\xf4\x8f\xbf\xbf\"");
  // Every string of stand-in bytes and escapes mixed comes back.
  for (int b = 0x80; b <= 0xFF; b++) {
    const std::string s = std::string("\xf4\x8f") + static_cast<char>(b) + static_cast<char>(0x80 | (b & 0x3F)) + "\xff";
    EXPECT_EQ(Parse(Dump(json(s))).get<std::string>(), s) << b;
  }
}

}  // namespace
}  // namespace layerfs::control
