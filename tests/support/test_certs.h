// Certificates a test makes for itself with OpenSSL: a certificate
// authority, and server certificates it issues for given names, valid or
// not (expired, not yet valid).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace hwfarm::test {

struct CertAndKey {
  std::string cert_pem;
  std::string key_pem; // unencrypted PKCS#8
};

class TestCa {
 public:
  // A new self-signed CA (EC P-256) named `name`.
  explicit TestCa(const std::string& name = "hwfarm test CA");
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  const std::string& certPem() const { return ca_.cert_pem; }

  // A server certificate for `names` (subjectAltName: an IP address as
  // iPAddress, anything else as dNSName; the first is also the CN), valid
  // from now + `from_s` to now + `to_s` seconds.
  CertAndKey issue(const std::vector<std::string>& names, long from_s = -3600, long to_s = 86400) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  CertAndKey ca_;
};

} // namespace hwfarm::test
