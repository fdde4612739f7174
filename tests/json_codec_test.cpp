// The API's hand-written renderers checked against independent references:
// Boost.JSON parses what the writer wrote, gmtime_r dates what Rfc3339 dated.
#include <catch2/catch.hpp>

#include <ctime>
#include <random>

#include <boost/json.hpp>

#include "config/fleet_config.h"
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

namespace {

// The 400 detail parseAcquire gives for `body` ("" when it is accepted).
std::string acquireError(const std::string& body) {
  Result<api::AcquireRequest> parsed = api::parseAcquire(body, config::Limits{}, config::LeaseConfig{});
  return parsed ? "" : parsed.status().message();
}

const std::string kBase = R"("selector":{"type":"mps2-an385"},"context":"manual")";

} // namespace

// Issue 9, item 12: {"context":"weekly","context":"manual"} was accepted,
// the last one winning.
TEST_CASE("a repeated JSON key is refused naming it, at any depth") {
  REQUIRE(acquireError(R"({"selector":{"type":"x"},"context":"weekly","context":"manual"})") ==
          "context: duplicate field");
  REQUIRE(acquireError("{" + kBase + R"(,"holder":{"job":"a","build":"1","job":"b"}})") == "holder.job: duplicate field");
  REQUIRE(acquireError(R"({"selector":{"type":"x","type":"y"},"context":"manual"})") == "selector.type: duplicate field");
  // The same key in two different objects is no duplicate.
  REQUIRE(acquireError("{" + kBase + R"(,"holder":{"job":"context"},"idempotency_key":"k"})") == "");
  // Keys split by escapes are compared whole: "\u0063ontext" is "context".
  REQUIRE(acquireError("{" + kBase + R"(,"\u0063ontext":"pr"})") == "context: duplicate field");
  Result<int64_t> renew = api::parseRenew(R"({"ttl_s":5,"ttl_s":6})", config::Limits{}, 1000);
  REQUIRE(!renew);
  REQUIRE(renew.status().is(Code::invalid_argument));
  REQUIRE(renew.status().message() == "ttl_s: duplicate field");
  Result<std::string> reason = api::parseReason(R"({"reason":"a","reason":"b"})");
  REQUIRE(!reason);
  REQUIRE(reason.status().message() == "reason: duplicate field");
  // Malformed JSON still says so; trailing data is malformed.
  REQUIRE(acquireError("{" + kBase + "} x").rfind("malformed JSON: ", 0) == 0);
  REQUIRE(acquireError("{" + kBase).rfind("malformed JSON: ", 0) == 0);
  REQUIRE(acquireError(" {" + kBase + "}\n ") == "");
}

// Issue 9, item 8: "retry\u0000-7" was stored as "retry", and after a restart
// the retry got a second lease.
TEST_CASE("control characters in identifiers and holder fields are refused naming the field") {
  const std::string nul = "\\u0000";
  struct Case {
    std::string body, detail;
  };
  std::vector<Case> cases{
      {"{" + kBase + R"(,"idempotency_key":"retry)" + nul + R"(-7"})",
       "idempotency_key: contains the control character U+0000 at byte 5"},
      {"{" + kBase + R"(,"holder":{"job":"tvm\nPR-1"}})", "holder.job: contains the control character U+000A at byte 3"},
      {"{" + kBase + R"(,"holder":{"build":"7\u001f"}})", "holder.build: contains the control character U+001F at byte 1"},
      {"{" + kBase + R"(,"holder":{"stage":"\u007fhw"}})", "holder.stage: contains the control character U+007F at byte 0"},
      {"{" + kBase + R"(,"holder":{"url":"http://x/\r\nX-Evil: 1"}})",
       "holder.url: contains the control character U+000D at byte 9"},
      {R"({"selector":{"type":"mps)" + nul + R"("},"context":"manual"})",
       "selector.type: contains the control character U+0000 at byte 3"},
      {R"({"selector":{"type":"x","worker":"w\t"},"context":"manual"})",
       "selector.worker: contains the control character U+0009 at byte 1"},
      {R"({"selector":{"labels":["ok","bad)" + nul + R"("]},"context":"manual"})",
       "selector.labels[1]: contains the control character U+0000 at byte 3"},
      {R"({"selector":{"type":"x"},"context":"manual)" + nul + R"("})",
       "context: contains the control character U+0000 at byte 6"},
  };
  for (const auto& c : cases) {
    INFO(c.body);
    REQUIRE(acquireError(c.body) ==
            c.detail + " (control characters U+0000-U+001F and U+007F are not allowed)");
  }
  Result<std::string> reason = api::parseReason(R"({"reason":"flaky\u0000"})");
  REQUIRE(!reason);
  REQUIRE(reason.status().message().rfind("reason: contains the control character U+0000 at byte 5", 0) == 0);
  // Printable UTF-8 is kept whole, every byte of it.
  std::string key = "retry-\xc3\xa9-" + std::string(118, 'k'); // 128 bytes
  auto ok = api::parseAcquire("{" + kBase + R"(,"idempotency_key":")" + key + "\"}", config::Limits{},
                              config::LeaseConfig{});
  REQUIRE(ok);
  REQUIRE(ok->request.idempotency_key == key);
}

TEST_CASE("a long unknown field name is echoed cut") {
  REQUIRE(acquireError("{" + kBase + ",\"" + std::string(1000, 'f') + "\":1}") ==
          std::string(128, 'f') + "\xe2\x80\xa6 (1000 bytes): unknown field");
}

// Issue 9, item 10: invalid UTF-8 from a URL was echoed raw inside JSON.
TEST_CASE("JSON output is valid UTF-8 whatever the strings hold") {
  std::string bad = "a\xff\xfe" "b\xc3\xa9" "c\xe2\x9c" "d\xed\xa0\x80" "e\xc0\xaf";
  api::JsonWriter w;
  w.beginObject().member("s", bad).endObject();
  REQUIRE(w.text() == "{\"s\":\"a\\ufffd\\ufffdb\xc3\xa9" "c\\ufffd\\ufffdd\\ufffd\\ufffd\\ufffde\\ufffd\\ufffd\"}");
  // Boost.JSON's parser refuses invalid UTF-8: this parses only if it is valid.
  auto parsed = boost::json::parse(w.text());
  REQUIRE(parsed.at("s").as_string() == "a\xef\xbf\xbd\xef\xbf\xbd" "b\xc3\xa9" "c\xef\xbf\xbd\xef\xbf\xbd"
                                        "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "e\xef\xbf\xbd\xef\xbf\xbd");
  // A DOM (as the router builds) goes through the same writer, keys too.
  boost::json::value dom{{"detail", "no lease " + bad}, {bad, {1, 2.5, nullptr, true, "x"}}};
  std::string text = api::toJson(dom);
  auto again = boost::json::parse(text).as_object();
  REQUIRE(again.at("detail").as_string() == "no lease " + std::string(parsed.at("s").as_string()));
  REQUIRE(again.size() == 2);
  REQUIRE(boost::json::serialize(again.begin()[1].value()) == "[1,2.5E0,null,true,\"x\"]");
  // Long strings with a bad byte at every offset (the 8-byte fast path).
  for (size_t at = 0; at < 40; ++at) {
    std::string s(40, 'p');
    s[at] = '\x80';
    api::JsonWriter one;
    one.beginArray().value(s).endArray();
    INFO(at);
    REQUIRE(boost::json::parse(one.text()).as_array().at(0).as_string() ==
            s.substr(0, at) + "\xef\xbf\xbd" + s.substr(at + 1));
  }
}
