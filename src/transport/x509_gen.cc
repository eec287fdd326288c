#include "transport/x509_gen.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <cstring>
#include <memory>

#include "transport/gnutls_init.h"

namespace felix::transport {
namespace {

struct CrtDeleter {
  void operator()(gnutls_x509_crt_int* c) const { gnutls_x509_crt_deinit(c); }
};
struct KeyDeleter {
  void operator()(gnutls_x509_privkey_int* k) const { gnutls_x509_privkey_deinit(k); }
};
using CrtPtr = std::unique_ptr<gnutls_x509_crt_int, CrtDeleter>;
using KeyPtr = std::unique_ptr<gnutls_x509_privkey_int, KeyDeleter>;

tl::unexpected<Error> GnutlsFail(const char* what, int rv) {
  return Fail(ErrorCode::kInternal,
              std::string("x509 generation: ") + what + ": " + gnutls_strerror(rv));
}

std::string ExportDatum(gnutls_datum_t d) {
  std::string s(reinterpret_cast<const char*>(d.data), d.size);
  gnutls_free(d.data);
  return s;
}

}  // namespace

Result<PemCertAndKey> GenerateCertificate(const CertSpec& spec, const PemCertAndKey* issuer) {
  EnsureGnutlsInitialized();
  gnutls_x509_privkey_t key_raw = nullptr;
  if (int rv = gnutls_x509_privkey_init(&key_raw); rv < 0) return GnutlsFail("privkey_init", rv);
  KeyPtr key(key_raw);
  if (int rv = gnutls_x509_privkey_generate(key.get(), GNUTLS_PK_ECDSA,
                                            GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
      rv < 0)
    return GnutlsFail("privkey_generate", rv);

  gnutls_x509_crt_t crt_raw = nullptr;
  if (int rv = gnutls_x509_crt_init(&crt_raw); rv < 0) return GnutlsFail("crt_init", rv);
  CrtPtr crt(crt_raw);
  int rv = gnutls_x509_crt_set_version(crt.get(), 3);
  unsigned char serial[16];
  if (rv >= 0) rv = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
  serial[0] &= 0x7f;  // positive
  if (rv >= 0) rv = gnutls_x509_crt_set_serial(crt.get(), serial, sizeof(serial));
  if (rv >= 0)
    rv = gnutls_x509_crt_set_activation_time(crt.get(),
                                             std::chrono::system_clock::to_time_t(spec.not_before));
  if (rv >= 0)
    rv = gnutls_x509_crt_set_expiration_time(crt.get(),
                                             std::chrono::system_clock::to_time_t(spec.not_after));
  if (rv >= 0)
    rv = gnutls_x509_crt_set_dn_by_oid(crt.get(), GNUTLS_OID_X520_COMMON_NAME, 0,
                                       spec.common_name.data(), spec.common_name.size());
  if (rv >= 0) rv = gnutls_x509_crt_set_key(crt.get(), key.get());
  for (const auto& name : spec.dns_names) {
    if (rv < 0) break;
    rv = gnutls_x509_crt_set_subject_alt_name(crt.get(), GNUTLS_SAN_DNSNAME, name.data(),
                                              name.size(), GNUTLS_FSAN_APPEND);
  }
  if (rv >= 0) rv = gnutls_x509_crt_set_basic_constraints(crt.get(), spec.is_ca ? 1 : 0, -1);
  if (rv >= 0)
    rv = gnutls_x509_crt_set_key_usage(
        crt.get(),
        spec.is_ca ? (GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN | GNUTLS_KEY_DIGITAL_SIGNATURE)
                   : GNUTLS_KEY_DIGITAL_SIGNATURE);
  if (rv >= 0 && !spec.is_ca) {
    rv = gnutls_x509_crt_set_key_purpose_oid(crt.get(), GNUTLS_KP_TLS_WWW_SERVER, 0);
    if (rv >= 0) rv = gnutls_x509_crt_set_key_purpose_oid(crt.get(), GNUTLS_KP_TLS_WWW_CLIENT, 0);
  }
  unsigned char key_id[64];
  size_t key_id_size = sizeof(key_id);
  if (rv >= 0) rv = gnutls_x509_crt_get_key_id(crt.get(), 0, key_id, &key_id_size);
  if (rv >= 0) rv = gnutls_x509_crt_set_subject_key_id(crt.get(), key_id, key_id_size);
  if (rv < 0) return GnutlsFail("set fields", rv);

  if (issuer == nullptr) {
    rv = gnutls_x509_crt_sign2(crt.get(), crt.get(), key.get(), GNUTLS_DIG_SHA256, 0);
    if (rv < 0) return GnutlsFail("self-sign", rv);
  } else {
    gnutls_x509_crt_t icrt_raw = nullptr;
    gnutls_x509_privkey_t ikey_raw = nullptr;
    gnutls_x509_crt_init(&icrt_raw);
    CrtPtr icrt(icrt_raw);
    gnutls_x509_privkey_init(&ikey_raw);
    KeyPtr ikey(ikey_raw);
    gnutls_datum_t cd{reinterpret_cast<unsigned char*>(const_cast<char*>(issuer->cert_pem.data())),
                      static_cast<unsigned>(issuer->cert_pem.size())};
    gnutls_datum_t kd{reinterpret_cast<unsigned char*>(const_cast<char*>(issuer->key_pem.data())),
                      static_cast<unsigned>(issuer->key_pem.size())};
    rv = gnutls_x509_crt_import(icrt.get(), &cd, GNUTLS_X509_FMT_PEM);
    if (rv >= 0) rv = gnutls_x509_privkey_import(ikey.get(), &kd, GNUTLS_X509_FMT_PEM);
    if (rv < 0) return GnutlsFail("import issuer", rv);
    unsigned char ikid[64];
    size_t ikid_size = sizeof(ikid);
    if (gnutls_x509_crt_get_subject_key_id(icrt.get(), ikid, &ikid_size, nullptr) >= 0)
      gnutls_x509_crt_set_authority_key_id(crt.get(), ikid, ikid_size);
    rv = gnutls_x509_crt_sign2(crt.get(), icrt.get(), ikey.get(), GNUTLS_DIG_SHA256, 0);
    if (rv < 0) return GnutlsFail("sign", rv);
  }

  gnutls_datum_t out{};
  PemCertAndKey result;
  if (rv = gnutls_x509_crt_export2(crt.get(), GNUTLS_X509_FMT_PEM, &out); rv < 0)
    return GnutlsFail("export certificate", rv);
  result.cert_pem = ExportDatum(out);
  if (rv = gnutls_x509_privkey_export2(key.get(), GNUTLS_X509_FMT_PEM, &out); rv < 0)
    return GnutlsFail("export key", rv);
  result.key_pem = ExportDatum(out);
  return result;
}

Result<PemCertAndKey> GenerateSelfSigned(const std::string& name) {
  CertSpec spec;
  spec.common_name = name;
  spec.dns_names = {name};
  return GenerateCertificate(spec);
}

}  // namespace felix::transport
