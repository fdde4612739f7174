// The upload policy (core/upload/policy.h): retry delays, which failures are
// permanent, where a run goes in the bucket and how keys are encoded.
#include <catch2/catch.hpp>

#include "daemon/core/upload/policy.h"

using namespace hwfarm::upload;

TEST_CASE("retry delays double from the first up to the cap and each lies in the upper half of its step") {
  Backoff b{1000, 60000};
  CHECK(retryDelayMs(b, 1, 0.0) == 500);
  CHECK(retryDelayMs(b, 1, 0.999) == 999);
  CHECK(retryDelayMs(b, 2, 0.0) == 1000);
  CHECK(retryDelayMs(b, 3, 0.5) == 3000);
  CHECK(retryDelayMs(b, 7, 0.0) == 30000);  // 64 s capped at 60 s
  CHECK(retryDelayMs(b, 40, 0.0) == 30000); // no overflow after many failures
  CHECK(retryDelayMs(b, 40, 1.0) == 60000);
  // Given many runs failing at once, their jitters spread the retries.
  CHECK(retryDelayMs(b, 4, 0.1) != retryDelayMs(b, 4, 0.9));
}

TEST_CASE("wrong credentials and refused requests are permanent, outages and throttling are transient") {
  CHECK(classify(403, "InvalidAccessKeyId") == FailureKind::permanent);
  CHECK(classify(403, "SignatureDoesNotMatch") == FailureKind::permanent);
  CHECK(classify(404, "NoSuchBucket") == FailureKind::permanent);
  CHECK(classify(400, "BadDigest") == FailureKind::permanent);
  CHECK(classify(0, "") == FailureKind::transient);
  CHECK(classify(500, "InternalError") == FailureKind::transient);
  CHECK(classify(503, "SlowDown") == FailureKind::transient);
  CHECK(classify(429, "") == FailureKind::transient);
  CHECK(classify(403, "RequestTimeTooSkewed") == FailureKind::transient);
}

TEST_CASE("a run's keys are prefix agent day commit and run id and the day's index sits beside its commits") {
  CHECK(runKey("hw", "lab1", "2026-12-01", "abc123", "r1") == "hw/lab1/2026-12-01/abc123/r1");
  CHECK(runKey("", "lab1", "2026-12-01", "", "r1") == "lab1/2026-12-01/unknown/r1");
  CHECK(indexKey("a/b", "lab1", "2026-12-01") == "a/b/lab1/2026-12-01/index.json");
  CHECK(utcDay(0) == "1970-01-01");
  CHECK(utcTime(1764547200123) == "2025-12-01T00:00:00.123Z");
}

TEST_CASE("keys are percent-encoded byte by byte except unreserved characters and slashes") {
  CHECK(encodeKey("a/b-c_d.e~f") == "a/b-c_d.e~f");
  CHECK(encodeKey("a b+c%d?e#f&g=h") == "a%20b%2Bc%25d%3Fe%23f%26g%3Dh");
  CHECK(encodeKey("\xc3\xbc") == "%C3%BC");
  // No key makes a query string: the one shape libcurl 7.88 signs wrong
  // (unsorted query parameters, docs/uploads.md) never reaches it.
  std::string every;
  for (int c = 1; c < 256; ++c) every += static_cast<char>(c);
  std::string encoded = encodeKey(every);
  CHECK(encoded.find('?') == std::string::npos);
  CHECK(encoded.find(' ') == std::string::npos);
  CHECK(encoded.size() == 67 + 3 * (255 - 67)); // 62 letters and digits, "-._~/"
}
