// End to end: the built `felix cert` makes a CA and node certificates that GnuTLS verifies
// against that CA with the expected DNS names, keys readable only by the owner, and refuses a
// bad node id and overwriting existing files (unless --force).
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "support/child_process.h"

namespace felix {
namespace {

using testing::BuiltProgram;
using testing::MakeTempDir;
using testing::RunProgram;

std::pair<int, std::string> Felix(const std::vector<std::string>& args) {
  return RunProgram(BuiltProgram("src/cli/felix"), args);
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Crt {
  gnutls_x509_crt_t crt = nullptr;
  explicit Crt(const std::string& pem) {
    gnutls_x509_crt_init(&crt);
    gnutls_datum_t d{reinterpret_cast<unsigned char*>(const_cast<char*>(pem.data())),
                     static_cast<unsigned>(pem.size())};
    ok = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM) == 0;
  }
  ~Crt() { gnutls_x509_crt_deinit(crt); }
  bool ok = false;
};

// GnuTLS verification status of `leaf` against the trust anchor `ca` (0 = trusted).
unsigned Verify(const Crt& leaf, const Crt& ca) {
  unsigned status = ~0u;
  gnutls_x509_crt_t list[] = {leaf.crt};
  gnutls_x509_crt_t anchors[] = {ca.crt};
  if (gnutls_x509_crt_list_verify(list, 1, anchors, 1, nullptr, 0, 0, &status) != 0) return ~0u;
  return status;
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  stat(path.c_str(), &st);
  return st.st_mode & 0777;
}

class CliCert : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("felix-cert"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CliCert, NodeCertificateChainsToTheCaAndNamesTheNode) {
  auto [code, out] = Felix({"cert", "ca", "--out", dir_ + "/ca"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(Mode(dir_ + "/ca/ca-key.pem"), 0600u);
  auto [code2, out2] = Felix({"cert", "node", "--ca", dir_ + "/ca", "--node-id", "n2", "--dns",
                              "broker-2.example", "--out", dir_ + "/nodes"});
  ASSERT_EQ(code2, 0) << out2;
  EXPECT_EQ(Mode(dir_ + "/nodes/n2-key.pem"), 0600u);

  Crt ca(Read(dir_ + "/ca/ca.pem"));
  Crt node(Read(dir_ + "/nodes/n2.pem"));
  ASSERT_TRUE(ca.ok && node.ok);
  EXPECT_EQ(Verify(node, ca), 0u);
  for (const char* name : {"n2", "localhost", "broker-2.example"})
    EXPECT_NE(gnutls_x509_crt_check_hostname(node.crt, name), 0u) << name;
  EXPECT_EQ(gnutls_x509_crt_check_hostname(node.crt, "n3"), 0u);

  // A certificate from another CA does not verify against this one.
  ASSERT_EQ(Felix({"cert", "ca", "--out", dir_ + "/other"}).first, 0);
  Crt other(Read(dir_ + "/other/ca.pem"));
  ASSERT_TRUE(other.ok);
  EXPECT_NE(Verify(node, other), 0u);
}

TEST_F(CliCert, RefusesABadNodeId) {
  ASSERT_EQ(Felix({"cert", "ca", "--out", dir_}).first, 0);
  for (const char* bad : {"N1", "-n1", "n_1", "n1/x"}) {
    auto [code, out] = Felix({"cert", "node", "--ca", dir_, "--node-id", bad, "--out", dir_});
    EXPECT_EQ(code, 2) << bad << ": " << out;
    EXPECT_NE(out.find("not a DNS name"), std::string::npos) << out;
  }
  auto [code, out] =
      Felix({"cert", "node", "--ca", dir_ + "/missing", "--node-id", "n1", "--out", dir_});
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("cannot read the CA certificate"), std::string::npos) << out;
}

TEST_F(CliCert, RefusesToOverwriteWithoutForce) {
  ASSERT_EQ(Felix({"cert", "ca", "--out", dir_}).first, 0);
  std::string before = Read(dir_ + "/ca.pem");
  auto [code, out] = Felix({"cert", "ca", "--out", dir_});
  EXPECT_EQ(code, 3);
  EXPECT_NE(out.find("already exists"), std::string::npos) << out;
  EXPECT_EQ(Read(dir_ + "/ca.pem"), before);

  ASSERT_EQ(Felix({"cert", "node", "--ca", dir_, "--node-id", "n1", "--out", dir_}).first, 0);
  std::string node = Read(dir_ + "/n1.pem");
  EXPECT_EQ(Felix({"cert", "node", "--ca", dir_, "--node-id", "n1", "--out", dir_}).first, 3);
  EXPECT_EQ(Read(dir_ + "/n1.pem"), node);
  ASSERT_EQ(
      Felix({"cert", "node", "--ca", dir_, "--node-id", "n1", "--out", dir_, "--force"}).first, 0);
  EXPECT_NE(Read(dir_ + "/n1.pem"), node);
  EXPECT_EQ(Mode(dir_ + "/n1-key.pem"), 0600u);
}

}  // namespace
}  // namespace felix
