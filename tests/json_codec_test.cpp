// The API's hand-written renderers checked against independent references:
// Boost.JSON parses what the writer wrote, gmtime_r dates what Rfc3339 dated.
#include <catch2/catch.hpp>

#include <ctime>
#include <random>

#include <boost/json.hpp>

#include "daemon/api/json_codec.h"
#include "daemon/api/json_writer.h"

using namespace hwfarm;

TEST_CASE("JSON writer escapes what RFC 8259 requires and nothing else") {
  api::JsonWriter w;
  std::string nasty = std::string("q\"b\\n\nt\tc") + '\x01' + '\x1f' + "é✓/";
  w.beginObject().member("s", nasty).member("n", static_cast<int64_t>(-5)).member("u", static_cast<uint64_t>(7));
  w.key("a").beginArray().value(true).null().beginObject().endObject().beginArray().endArray().endArray();
  w.stringOrNull("e", "").stringOrNull("f", "x").endObject();
  auto parsed = boost::json::parse(w.text()).as_object();
  CHECK(parsed.at("s").as_string() == nasty);
  CHECK(parsed.at("n").as_int64() == -5);
  CHECK(parsed.at("u").to_number<int64_t>() == 7);
  CHECK(parsed.at("a").as_array().size() == 4);
  CHECK(parsed.at("e").is_null());
  CHECK(parsed.at("f").as_string() == "x");
  CHECK(w.text().find("\\u0001") != std::string::npos);
  CHECK(w.text().find("é✓/") != std::string::npos); // UTF-8 and "/" pass through
}

TEST_CASE("RFC 3339 times match gmtime_r to the millisecond") {
  std::mt19937_64 rng(20261130);
  std::vector<int64_t> samples{0, 999, 1000, 86399999, 86400000, 951782400000 /* 2000-02-29 */,
                               4102444799999 /* 2099-12-31T23:59:59.999 */, 253402300799999 /* 9999-12-31 */};
  for (int i = 0; i < 20000; ++i) samples.push_back(static_cast<int64_t>(rng() % 253402300800000ULL));
  for (int64_t ms : samples) {
    std::time_t seconds = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char expected[80]; // room for any int the compiler cannot rule out
    std::snprintf(expected, sizeof expected, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
    INFO(ms);
    REQUIRE(api::Rfc3339(ms).view() == std::string_view(expected));
    REQUIRE(api::rfc3339(ms) == expected);
  }
}

TEST_CASE("JSON writer escapes a character wherever it falls in a long string") {
  // The fast path scans 8 bytes at a time: put each special character at
  // every offset of a 40-byte string of plain (ASCII and UTF-8) text.
  const std::string plain = "abcdefgh\xc3\xa9ijklmnopqrstuvwxyz0123456789AB";
  for (char special : {'"', '\\', '\n', '\x01', '\x1f'}) {
    for (size_t at = 0; at < plain.size(); ++at) {
      if (static_cast<unsigned char>(plain[at]) >= 0x80) continue; // keep the UTF-8 sequence whole
      std::string s = plain;
      s[at] = special;
      api::JsonWriter w;
      w.beginArray().value(s).endArray();
      INFO("character " << static_cast<int>(special) << " at " << at);
      REQUIRE(boost::json::parse(w.text()).as_array().at(0).as_string() == s);
    }
  }
}
