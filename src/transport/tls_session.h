// Internal to felix_transport (includes GnuTLS and ngtcp2): building GnuTLS sessions for one
// QUIC connection from a TlsContext, and reading what the handshake established.
#pragma once

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/tls_context.h"

namespace felix::transport {

struct TlsCredentials {
  gnutls_certificate_credentials_t cred = nullptr;
  ~TlsCredentials();
};

// One per connection, owned by it. `conn_ref` is what ngtcp2_crypto_gnutls finds through
// gnutls_session_get_ptr; its user_data points back at this object.
struct TlsSessionRef {
  ngtcp2_crypto_conn_ref conn_ref{};
  ngtcp2_conn* conn = nullptr;
  bool require_peer_cert = false;
  bool verify_chain = false;
  std::string expected_name;  // dialler: the name the peer's certificate must carry
  std::string failure;        // why our verification refused the peer
  std::vector<std::string> peer_dns_names;
  bool alpn_refused = false;  // our ALPN hook refused the handshake
};

// Creates a session for a server (listener) or client (dialler) connection; `ref` must
// outlive the session. The returned session is owned by the caller (gnutls_deinit).
Result<gnutls_session_t> NewTlsSession(TlsContext& ctx, const TlsCredentials& creds, bool server,
                                       const std::string& server_name, TlsSessionRef* ref);

std::string SelectedAlpn(gnutls_session_t session);

}  // namespace felix::transport
