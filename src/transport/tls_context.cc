#include "transport/tls_context.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "transport/gnutls_init.h"
#include "transport/tls_session.h"
#include "transport/x509_gen.h"

namespace felix::transport {
namespace {

// TLS 1.3 only; QUIC forbids the middlebox compatibility mode (RFC 9001 §8.4).
constexpr char kPriority[] =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"
    "+CHACHA20-POLY1305:+AES-128-CCM:%DISABLE_TLS13_COMPAT_MODE";

Result<std::string> ReadFile(const std::string& var, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(ErrorCode::kInvalidArgument, var + "=" + path + ": cannot read file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

gnutls_datum_t Datum(const std::string& s) {
  return gnutls_datum_t{reinterpret_cast<unsigned char*>(const_cast<char*>(s.data())),
                        static_cast<unsigned>(s.size())};
}

TlsSessionRef* RefOf(gnutls_session_t session) {
  auto* cref = static_cast<ngtcp2_crypto_conn_ref*>(gnutls_session_get_ptr(session));
  return cref ? static_cast<TlsSessionRef*>(cref->user_data) : nullptr;
}

std::vector<std::string> LeafDnsNames(const gnutls_datum_t& der) {
  std::vector<std::string> names;
  gnutls_x509_crt_t crt;
  if (gnutls_x509_crt_init(&crt) < 0) return names;
  if (gnutls_x509_crt_import(crt, &der, GNUTLS_X509_FMT_DER) == 0) {
    for (unsigned i = 0;; ++i) {
      char buf[512];
      size_t size = sizeof(buf);
      unsigned type = 0;
      int rv = gnutls_x509_crt_get_subject_alt_name2(crt, i, buf, &size, &type, nullptr);
      if (rv == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) break;
      if (rv < 0) continue;
      if (type == GNUTLS_SAN_DNSNAME) names.emplace_back(buf, size);
    }
  }
  gnutls_x509_crt_deinit(crt);
  return names;
}

// Runs inside the handshake when the peer's Certificate message has been received.
int VerifyPeer(gnutls_session_t session) {
  TlsSessionRef* ref = RefOf(session);
  if (ref == nullptr) return GNUTLS_E_CERTIFICATE_ERROR;
  unsigned n = 0;
  const gnutls_datum_t* certs = gnutls_certificate_get_peers(session, &n);
  if (certs == nullptr || n == 0) {
    if (ref->require_peer_cert) {
      ref->failure = "peer presented no certificate";
      return GNUTLS_E_NO_CERTIFICATE_FOUND;
    }
    return 0;
  }
  ref->peer_dns_names = LeafDnsNames(certs[0]);
  if (!ref->verify_chain) return 0;
  unsigned status = 0;
  int rv = gnutls_certificate_verify_peers3(
      session, ref->expected_name.empty() ? nullptr : ref->expected_name.c_str(), &status);
  if (rv < 0) {
    ref->failure = std::string("certificate verification failed: ") + gnutls_strerror(rv);
    return GNUTLS_E_CERTIFICATE_ERROR;
  }
  if (status != 0) {
    gnutls_datum_t out{};
    if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
      ref->failure = std::string(reinterpret_cast<const char*>(out.data), out.size);
      gnutls_free(out.data);
    } else {
      ref->failure = "certificate verification failed";
    }
    return GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR;
  }
  return 0;
}

bool SelectedIs(gnutls_session_t session, const char* id) {
  gnutls_datum_t alpn{};
  if (gnutls_alpn_get_selected_protocol(session, &alpn) != 0) return false;
  return alpn.size == std::strlen(id) && std::memcmp(alpn.data, id, alpn.size) == 0;
}

// Internal listener: after the ClientHello was processed, `felix-internal/1` must have been
// selected (GNUTLS_ALPN_MANDATORY alone lets a ClientHello without ALPN through).
int InternalServerAlpnHook(gnutls_session_t session, unsigned, unsigned, unsigned,
                           const gnutls_datum_t*) {
  if (SelectedIs(session, kInternalAlpn)) return 0;
  if (TlsSessionRef* ref = RefOf(session)) ref->alpn_refused = true;
  return GNUTLS_E_NO_APPLICATION_PROTOCOL;
}

// Internal dialler: before the server's Finished is processed, the server must have selected
// `felix-internal/1` in its EncryptedExtensions.
int InternalClientAlpnHook(gnutls_session_t session, unsigned, unsigned, unsigned incoming,
                           const gnutls_datum_t*) {
  if (!incoming || SelectedIs(session, kInternalAlpn)) return 0;
  if (TlsSessionRef* ref = RefOf(session)) ref->alpn_refused = true;
  return GNUTLS_E_NO_APPLICATION_PROTOCOL;
}

}  // namespace

const char* RoleName(Role role) {
  return role == Role::kClient ? "client" : "internal";
}

TlsCredentials::~TlsCredentials() {
  if (cred) gnutls_certificate_free_credentials(cred);
}

TlsContext::TlsContext(TlsOptions options) : options_(std::move(options)) {}
TlsContext::~TlsContext() = default;

Result<std::shared_ptr<TlsContext>> TlsContext::Create(TlsOptions options,
                                                       std::vector<std::string>* warnings) {
  EnsureGnutlsInitialized();
  if (options.cert_file.empty() != options.key_file.empty())
    return Fail(ErrorCode::kInvalidArgument,
                options.cert_var + " and " + options.key_var + " must be set together");
  std::shared_ptr<TlsContext> ctx(new TlsContext(std::move(options)));
  const TlsOptions& o = ctx->options_;
  if (o.cert_file.empty() && !o.no_certificate) {
    auto generated = GenerateSelfSigned(o.self_signed_name);
    if (!generated) return tl::unexpected(generated.error());
    ctx->self_signed_pem_ = generated->cert_pem;
    ctx->self_signed_key_pem_ = generated->key_pem;
    if (warnings)
      warnings->push_back(std::string(RoleName(o.role)) + " QUIC listener: " + o.cert_var + "/" +
                          o.key_var + " unset, using a generated self-signed '" +
                          o.self_signed_name + "' certificate");
  }
  if (!o.ca_file.empty()) {
    auto ca = ReadFile(o.ca_var, o.ca_file);
    if (!ca) return tl::unexpected(ca.error());
    ctx->ca_pem_ = std::move(*ca);
  } else if (warnings && o.role == Role::kInternal) {
    warnings->push_back("internal QUIC listener: " + o.ca_var +
                        " unset, peer brokers are not authenticated (accepting any certificate)");
  }
  auto creds = ctx->Build();
  if (!creds) return tl::unexpected(creds.error());
  ctx->current_ = std::move(*creds);
  ctx->loaded_at_ = std::chrono::steady_clock::now();
  return ctx;
}

Result<std::shared_ptr<TlsCredentials>> TlsContext::Build() {
  auto creds = std::make_shared<TlsCredentials>();
  if (int rv = gnutls_certificate_allocate_credentials(&creds->cred); rv < 0)
    return Fail(ErrorCode::kInternal, std::string("TLS credentials: ") + gnutls_strerror(rv));
  std::string cert_pem = self_signed_pem_, key_pem = self_signed_key_pem_;
  std::string what = "generated self-signed certificate";
  if (!options_.cert_file.empty()) {
    auto cert = ReadFile(options_.cert_var, options_.cert_file);
    if (!cert) return tl::unexpected(cert.error());
    auto key = ReadFile(options_.key_var, options_.key_file);
    if (!key) return tl::unexpected(key.error());
    cert_pem = std::move(*cert);
    key_pem = std::move(*key);
    what = options_.cert_var + "=" + options_.cert_file + " / " + options_.key_var + "=" +
           options_.key_file;
  }
  if (options_.no_certificate && options_.cert_file.empty()) cert_pem.clear();
  gnutls_datum_t cd = Datum(cert_pem), kd = Datum(key_pem);
  int rv = cert_pem.empty() ? 0
                            : gnutls_certificate_set_x509_key_mem2(creds->cred, &cd, &kd,
                                                                   GNUTLS_X509_FMT_PEM, nullptr, 0);
  // Wipe our copy of the key text.
  std::fill(key_pem.begin(), key_pem.end(), '\0');
  if (rv < 0)
    return Fail(ErrorCode::kInvalidArgument,
                what + ": certificate or key not usable: " + gnutls_strerror(rv));
  if (!ca_pem_.empty()) {
    gnutls_datum_t ca = Datum(ca_pem_);
    int n = gnutls_certificate_set_x509_trust_mem(creds->cred, &ca, GNUTLS_X509_FMT_PEM);
    if (n <= 0)
      return Fail(ErrorCode::kInvalidArgument,
                  options_.ca_var + "=" + options_.ca_file + ": no usable CA certificate" +
                      (n < 0 ? std::string(": ") + gnutls_strerror(n) : std::string()));
  }
  return creds;
}

Result<void> TlsContext::ReloadNow() {
  auto creds = Build();
  std::lock_guard<std::mutex> lock(mu_);
  loaded_at_ = std::chrono::steady_clock::now();
  if (!creds) return tl::unexpected(creds.error());
  current_ = std::move(*creds);
  return Ok();
}

void TlsContext::MaybeReload() {
  if (options_.cert_file.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::chrono::steady_clock::now() - loaded_at_ < options_.reload_interval) return;
  }
  if (auto r = ReloadNow(); !r)
    spdlog::warn("tls reload failed role={} error=\"{}\" (keeping the previous certificate)",
                 RoleName(options_.role), r.error().message);
}

std::shared_ptr<TlsCredentials> TlsContext::Current() {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

Result<gnutls_session_t> NewTlsSession(TlsContext& ctx, const TlsCredentials& creds, bool server,
                                       const std::string& server_name, TlsSessionRef* ref) {
  gnutls_session_t s = nullptr;
  int rv = gnutls_init(&s, (server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_NO_END_OF_EARLY_DATA);
  if (rv < 0) return Fail(ErrorCode::kInternal, std::string("gnutls_init: ") + gnutls_strerror(rv));
  auto fail = [&](const char* what) -> tl::unexpected<Error> {
    gnutls_deinit(s);
    return Fail(ErrorCode::kInternal, std::string(what) + ": " + gnutls_strerror(rv));
  };
  if ((rv = gnutls_priority_set_direct(s, kPriority, nullptr)) < 0) return fail("priority");
  rv = server ? ngtcp2_crypto_gnutls_configure_server_session(s)
              : ngtcp2_crypto_gnutls_configure_client_session(s);
  if (rv != 0) return fail("ngtcp2_crypto_gnutls_configure_session");
  gnutls_session_set_ptr(s, &ref->conn_ref);
  if ((rv = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, creds.cred)) < 0)
    return fail("credentials");
  const Role role = ctx.role();
  const bool verify = ctx.verifies_peers();
  ref->verify_chain = verify;
  gnutls_session_set_verify_function(s, VerifyPeer);
  if (server) {
    gnutls_certificate_send_x509_rdn_sequence(s, 1);
    if (role == Role::kInternal) {
      gnutls_datum_t p{reinterpret_cast<unsigned char*>(const_cast<char*>(kInternalAlpn)),
                       static_cast<unsigned>(std::strlen(kInternalAlpn))};
      rv = gnutls_alpn_set_protocols(s, &p, 1,
                                     GNUTLS_ALPN_MANDATORY | GNUTLS_ALPN_SERVER_PRECEDENCE);
      if (rv < 0) return fail("alpn");
      gnutls_handshake_set_hook_function(s, GNUTLS_HANDSHAKE_CLIENT_HELLO, GNUTLS_HOOK_POST,
                                         InternalServerAlpnHook);
      if (verify) {
        ref->require_peer_cert = true;
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
      }
    } else {
      // Selects felix/1 when offered; MANDATORY refuses a client whose list has no felix/1;
      // a ClientHello with no ALPN extension passes (the client port accepts those).
      gnutls_datum_t p{reinterpret_cast<unsigned char*>(const_cast<char*>(kClientAlpn)),
                       static_cast<unsigned>(std::strlen(kClientAlpn))};
      rv = gnutls_alpn_set_protocols(s, &p, 1,
                                     GNUTLS_ALPN_MANDATORY | GNUTLS_ALPN_SERVER_PRECEDENCE);
      if (rv < 0) return fail("alpn");
      if (verify) gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
    }
  } else {
    ref->expected_name = verify ? server_name : std::string();
    ref->require_peer_cert = verify;
    if (!server_name.empty())
      gnutls_server_name_set(s, GNUTLS_NAME_DNS, server_name.data(), server_name.size());
    std::vector<gnutls_datum_t> offer;
    if (role == Role::kInternal) {
      offer.push_back({reinterpret_cast<unsigned char*>(const_cast<char*>(kInternalAlpn)),
                       static_cast<unsigned>(std::strlen(kInternalAlpn))});
      gnutls_handshake_set_hook_function(s, GNUTLS_HANDSHAKE_FINISHED, GNUTLS_HOOK_PRE,
                                         InternalClientAlpnHook);
    } else {
      for (const auto& id : ctx.options().dial_alpn)
        offer.push_back({reinterpret_cast<unsigned char*>(const_cast<char*>(id.data())),
                         static_cast<unsigned>(id.size())});
    }
    if (!offer.empty()) {
      rv = gnutls_alpn_set_protocols(s, offer.data(), static_cast<unsigned>(offer.size()),
                                     GNUTLS_ALPN_MANDATORY);
      if (rv < 0) return fail("alpn");
    }
  }
  return s;
}

std::string SelectedAlpn(gnutls_session_t session) {
  gnutls_datum_t alpn{};
  if (gnutls_alpn_get_selected_protocol(session, &alpn) != 0) return {};
  return std::string(reinterpret_cast<const char*>(alpn.data), alpn.size);
}

}  // namespace felix::transport
