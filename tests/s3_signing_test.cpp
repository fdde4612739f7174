// The S3 client's signing (libcurl's CURLOPT_AWS_SIGV4), which s3rver does
// not fully check: against the AWS SigV4 test suite's published vectors
// (botocore's tests/unit/auth/aws4_testsuite: key AKIDEXAMPLE, region
// us-east-1, service "service", 20150830T123600Z), and every request shape
// hwfarm sends recomputed by botocore's own signer. A local listener
// (tests/s3/capture.py) records what libcurl really sends. Also: the proxy
// from http_proxy / https_proxy is used.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <boost/json.hpp>

#include "daemon/services/s3_client.h"
#include "tests/support/process.h"

using namespace hwfarm;
using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

const config::S3Credentials kExample{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};

// capture.py recording `count` requests into <dir>/requests.jsonl.
struct Capture {
  Capture(const TempDir& dir, int count)
      : path(dir.file("requests.jsonl")),
        process({HWFARM_PYTHON3, std::string(HWFARM_SOURCE_DIR) + "/tests/s3/capture.py", path, std::to_string(count)},
                dir.file("capture.out"), dir.file("capture.err")) {
    auto out = waitForText(dir.file("capture.out"), "\n", 10s);
    REQUIRE(out);
    port = std::stoi(*out);
  }
  std::vector<json::object> requests() const {
    std::vector<json::object> out;
    std::string text = readFile(path);
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      out.push_back(json::parse(text.substr(at, end - at)).as_object());
      at = end + 1;
    }
    return out;
  }
  std::string header(const json::object& request, const std::string& name) const {
    for (const auto& h : request.at("headers").as_array())
      if (h.as_array()[0].as_string() == name) return std::string(h.as_array()[1].as_string());
    return "";
  }
  std::string path;
  Process process;
  int port = 0;
};

} // namespace

TEST_CASE("libcurl's SigV4 signs the AWS test suite's get-vanilla and post-vanilla as published") {
  TempDir dir;
  Capture capture(dir, 2);
  // Given the suite's request, host and time, sent to the listener.
  for (const char* method : {"GET", "POST"}) {
    SignedRequest r;
    r.method = method;
    r.url = "http://example.amazonaws.com/";
    r.service = "service";
    r.headers = {{"X-Amz-Date", "20150830T123600Z"}};
    r.connect_to = "example.amazonaws.com:80:127.0.0.1:" + std::to_string(capture.port);
    S3Answer a = sendSigned(r, kExample);
    REQUIRE(a.http_status == 200);
  }
  auto sent = capture.requests();
  REQUIRE(sent.size() == 2);
  std::string scope = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                      "SignedHeaders=host;x-amz-date, Signature=";
  // get-vanilla.authz and post-vanilla.authz of the suite.
  CHECK(capture.header(sent[0], "Authorization") ==
        scope + "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  CHECK(capture.header(sent[1], "Authorization") ==
        scope + "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
}

TEST_CASE("every request shape hwfarm sends is signed as botocore signs it with its payload checksums") {
  TempDir dir;
  Capture capture(dir, 5);
  S3Client client({"http://127.0.0.1:" + std::to_string(capture.port), "eu-west-3", "hw-results"},
                  {"S3RVER", "S3RVER-secret/+x"});
  std::string binary;
  for (int i = 0; i < 3000; ++i) binary += static_cast<char>(i * 7);
  // An artifact, a binary output, an empty file, a key with every kind of
  // character a prefix or name may hold, and the GET of a day's index.
  REQUIRE(client.put("lab/lab1/2026-12-01/unknown/r1/junit.xml", "<testsuites/>", "application/xml").ok());
  REQUIRE(client.put("lab/r1/outputs/a__b/case.out.npy", binary, "application/octet-stream").ok());
  REQUIRE(client.put("lab/r1/logs/empty.txt", "", "text/plain; charset=utf-8").ok());
  REQUIRE(client.put("p q+r%s&t=u;v,w$x@y!z'(*)[]{}^`|\\\"<>#?\xc3\xbc/./../~k", "x", "application/json").ok());
  REQUIRE(client.get("lab/lab1/2026-12-01/index.json").ok());
  CommandResult check = runCommand({HWFARM_PYTHON3, std::string(HWFARM_SOURCE_DIR) + "/tests/s3/botocore_check.py",
                                    capture.path, "S3RVER", "S3RVER-secret/+x", "eu-west-3"});
  INFO(check.out << check.err);
  CHECK(check.status.exited);
  CHECK(check.status.code == 0);
  CHECK(std::count(check.out.begin(), check.out.end(), '\n') == 5);
  CHECK(check.out.find("MISMATCH") == std::string::npos);
}

TEST_CASE("the proxy in http_proxy carries requests to an http endpoint and https_proxy tunnels an https one") {
  TempDir dir;
  Capture capture(dir, 2);
  std::string proxy = "http://127.0.0.1:" + std::to_string(capture.port);
  ::setenv("http_proxy", proxy.c_str(), 1);
  ::setenv("https_proxy", proxy.c_str(), 1);
  ::unsetenv("no_proxy");
  ::unsetenv("NO_PROXY");
  S3Client plain({"http://s3.lab.invalid:9000", "us-east-1", "hw"}, {"S3RVER", "S3RVER"});
  S3Answer a = plain.put("k", "body", "text/plain");
  S3Client tls({"https://s3.lab.invalid", "us-east-1", "hw", 5, 5}, {"S3RVER", "S3RVER"});
  S3Answer b = tls.put("k", "body", "text/plain");
  ::unsetenv("http_proxy");
  ::unsetenv("https_proxy");
  CHECK(a.http_status == 200); // the proxy answered for the server
  CHECK_FALSE(b.ok());         // the listener is no TLS server: the tunnel's handshake fails
  auto sent = capture.requests();
  REQUIRE(sent.size() == 2);
  CHECK(std::string(sent[0].at("request_line").as_string()) == "PUT http://s3.lab.invalid:9000/hw/k HTTP/1.1");
  CHECK(std::string(sent[1].at("request_line").as_string()).rfind("CONNECT s3.lab.invalid:443 HTTP/1.1", 0) == 0);
}
