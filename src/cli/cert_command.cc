// `felix cert ca|node`: the certificates a cluster's peer mTLS needs (cluster-etcd.md D5).
//
//   felix cert ca   --out DIR                      DIR/ca.pem, DIR/ca-key.pem
//   felix cert node --ca DIR --node-id n1 [--dns NAME]... --out DIR
//                                                  DIR/n1.pem, DIR/n1-key.pem
//
// A node certificate is signed by the CA in `--ca DIR` and carries the DNS names the node id,
// `localhost` and every --dns: peers check that a peer's certificate names its node id, and
// clients dialling a loopback broker verify `localhost`. Keys are written with mode 0600.
// Existing files are never overwritten unless --force is given (a silently replaced CA would
// orphan every node certificate it signed). Keys are ECDSA P-256 (transport/x509_gen.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/client_connection.h"
#include "cli/command.h"
#include "cluster/etcd_keys.h"
#include "transport/x509_gen.h"

namespace felix::cli {

namespace {

namespace fs = std::filesystem;

struct CertOptions {
  std::string out;
  std::string ca_dir;
  std::string node_id;
  std::vector<std::string> dns;
  int days = 0;  // 0: the default for the kind
  bool force = false;
};

std::string CaCertPath(const std::string& dir) {
  return (fs::path(dir) / "ca.pem").string();
}
std::string CaKeyPath(const std::string& dir) {
  return (fs::path(dir) / "ca-key.pem").string();
}

// Refuses (before anything is written) when a target exists and --force was not given, so a
// refused command leaves no half-written pair behind.
void RefuseExisting(const std::vector<std::string>& paths, bool force) {
  if (force) return;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::exists(p, ec) || fs::is_symlink(p, ec))
      Die(p + " already exists (pass --force to overwrite it)", 3);
  }
}

// Writes `content` to `path` with `mode`, replacing any existing file atomically (write a
// temporary file in the same directory, fsync, rename), so a crash never leaves a torn key.
void WriteFile(const std::string& path, const std::string& content, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) Die("cannot create " + tmp + ": " + std::strerror(errno));
  bool ok = fchmod(fd, mode) == 0;  // the umask may have narrowed or the file pre-existed
  size_t done = 0;
  while (ok && done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  int saved = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) saved = errno;
    unlink(tmp.c_str());
    Die("cannot write " + path + ": " + std::strerror(saved));
  }
}

std::string ReadFileOrDie(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + what + " " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void MakeDirOrDie(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) Die("cannot create directory " + dir + ": " + ec.message());
}

transport::CertSpec Spec(const std::string& cn, int days, int default_days) {
  transport::CertSpec spec;
  spec.common_name = cn;
  spec.not_after =
      std::chrono::system_clock::now() + std::chrono::hours(24) * (days > 0 ? days : default_days);
  return spec;
}

void RunCa(const CertOptions& o) {
  std::string cert = CaCertPath(o.out);
  std::string key = CaKeyPath(o.out);
  RefuseExisting({cert, key}, o.force);
  transport::CertSpec spec = Spec("felix cluster CA", o.days, 3650);
  spec.is_ca = true;
  auto made = transport::GenerateCertificate(spec);
  if (!made) Die("cannot generate the CA: " + made.error().message);
  MakeDirOrDie(o.out);
  WriteFile(key, made->key_pem, 0600);
  WriteFile(cert, made->cert_pem, 0644);
  std::cout << "wrote " << cert << " and " << key << "\n";
}

void RunNode(const CertOptions& o) {
  if (auto ok = cluster::ValidateNodeId(o.node_id); !ok) Die("--node-id: " + ok.error().message, 2);
  std::vector<std::string> names = {o.node_id, "localhost"};
  for (const auto& d : o.dns) {
    if (auto ok = cluster::ValidateNodeId(d); !ok) Die("--dns '" + d + "' is not a DNS name", 2);
    if (std::find(names.begin(), names.end(), d) == names.end()) names.push_back(d);
  }
  std::string cert = (fs::path(o.out) / (o.node_id + ".pem")).string();
  std::string key = (fs::path(o.out) / (o.node_id + "-key.pem")).string();
  RefuseExisting({cert, key}, o.force);
  transport::PemCertAndKey ca{ReadFileOrDie(CaCertPath(o.ca_dir), "the CA certificate"),
                              ReadFileOrDie(CaKeyPath(o.ca_dir), "the CA key")};
  transport::CertSpec spec = Spec(o.node_id, o.days, 365);
  spec.dns_names = names;
  auto made = transport::GenerateCertificate(spec, &ca);
  if (!made)
    Die("cannot generate the node certificate (is " + o.ca_dir +
        " a CA made by `felix cert ca`?): " + made.error().message);
  MakeDirOrDie(o.out);
  WriteFile(key, made->key_pem, 0600);
  WriteFile(cert, made->cert_pem, 0644);
  std::cout << "wrote " << cert << " and " << key << "\n";
}

}  // namespace

void RegisterCertCommands(CLI::App& app) {
  CLI::App* group =
      app.add_subcommand("cert", "make a cluster CA and node certificates (peer mTLS)");
  group->require_subcommand(1);

  auto ca_opts = std::make_shared<CertOptions>();
  CLI::App* ca = group->add_subcommand("ca", "make a CA: DIR/ca.pem and DIR/ca-key.pem (0600)");
  ca->add_option("--out", ca_opts->out, "output directory")->required();
  ca->add_option("--days", ca_opts->days, "validity in days (default 3650)")
      ->check(CLI::PositiveNumber);
  ca->add_flag("--force", ca_opts->force, "overwrite existing files");
  ca->callback([ca_opts] { RunCa(*ca_opts); });

  auto node_opts = std::make_shared<CertOptions>();
  CLI::App* node = group->add_subcommand(
      "node",
      "make a node certificate signed by the CA: DIR/<node-id>.pem and DIR/<node-id>-key.pem");
  node->add_option("--ca", node_opts->ca_dir, "directory of ca.pem and ca-key.pem")->required();
  node->add_option("--node-id", node_opts->node_id, "node id (a DNS name, e.g. n1)")->required();
  node->add_option("--dns", node_opts->dns, "extra DNS name (repeatable)");
  node->add_option("--out", node_opts->out, "output directory")->required();
  node->add_option("--days", node_opts->days, "validity in days (default 365)")
      ->check(CLI::PositiveNumber);
  node->add_flag("--force", node_opts->force, "overwrite existing files");
  node->callback([node_opts] { RunNode(*node_opts); });
}

}  // namespace felix::cli
