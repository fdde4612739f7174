// The upload policy (docs/uploads.md), pure: where a run's artifacts go in
// the bucket, how object keys are written in a request, when a failed
// upload is tried again, and which failures are never retried.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hwfarm::upload {

// Delays between attempts: the first retry after `initial_ms`, each next
// one twice the last, at most `max_ms`.
struct Backoff {
  int64_t initial_ms = 1000;
  int64_t max_ms = 300000;
};

// The delay before attempt `failures` + 1, after `failures` (>= 1) failed
// attempts in a row: "equal jitter" over the exponential step,
// uniform in [step / 2, step] with step = min(max, initial * 2^(failures-1)),
// `jitter` in [0, 1) choosing the point (0: step / 2). So retries of many
// runs after one outage spread out, and none comes sooner than half its step.
int64_t retryDelayMs(const Backoff& b, int failures, double jitter);

// How an S3 answer is treated.
enum class FailureKind {
  transient, // try again later: the network, a timeout, 5xx, 408, 429
  permanent, // never retried on its own: wrong credentials or signature, no bucket, a refused request
};

// `http_status` 0: no answer (connection refused, DNS, TLS, timeout).
// `s3_code`: the <Code> of S3's XML error body ("" if none).
FailureKind classify(int http_status, std::string_view s3_code);

// The key prefix of one run: "<prefix>/<agent>/<yyyy-mm-dd>/<commit>/<run-id>"
// (no leading "/" when `prefix` is empty); `day` is the run's UTC end date
// and an empty `commit` is "unknown".
std::string runKey(std::string_view prefix, std::string_view agent, std::string_view day, std::string_view commit,
                   std::string_view run_id);
// "<prefix>/<agent>/<yyyy-mm-dd>/index.json".
std::string indexKey(std::string_view prefix, std::string_view agent, std::string_view day);
// "yyyy-mm-dd" of a Unix time in ms (UTC).
std::string utcDay(int64_t unix_ms);
// "yyyy-mm-ddThh:mm:ss.mmmZ" of a Unix time in ms (UTC).
std::string utcTime(int64_t unix_ms);

// `key` as the path of an S3 request (after "/<bucket>/"): every byte but
// A-Z a-z 0-9 - . _ ~ and '/' as %XX (upper-case hex), so the request line
// carries any key, and the path SigV4 signs is exactly the one sent (S3
// signs the path as sent, without encoding it again).
std::string encodeKey(std::string_view key);

} // namespace hwfarm::upload
