// Helpers for transport tests: certificates generated in-process (GnuTLS), written to a temp
// directory; waiting on futures with deadlines; running code on an endpoint's loop thread.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "support/child_process.h"
#include "transport/endpoint.h"
#include "transport/tls_context.h"
#include "transport/x509_gen.h"

namespace felix::transport::test {

inline constexpr std::chrono::seconds kWait{20};

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A CA plus files on disk.
struct TestPki {
  std::string dir = felix::testing::MakeTempDir("felix-transport-pki");
  PemCertAndKey ca;

  explicit TestPki(const std::string& ca_name = "felix-test-ca") {
    CertSpec spec;
    spec.common_name = ca_name;
    spec.is_ca = true;
    auto r = GenerateCertificate(spec);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    ca = *r;
    WriteFile(ca_file(), ca.cert_pem);
  }
  std::string ca_file() const { return dir + "/ca.pem"; }

  // Issues a leaf for `names` and writes <stem>.crt / <stem>.key; returns the two paths.
  std::pair<std::string, std::string> Issue(
      const std::string& stem, std::vector<std::string> names,
      std::chrono::system_clock::time_point not_after = std::chrono::system_clock::now() +
                                                        std::chrono::hours(24),
      std::chrono::system_clock::time_point not_before = std::chrono::system_clock::now() -
                                                         std::chrono::hours(1)) const {
    CertSpec spec;
    spec.common_name = names.empty() ? stem : names.front();
    spec.dns_names = std::move(names);
    spec.not_before = not_before;
    spec.not_after = not_after;
    auto r = GenerateCertificate(spec, &ca);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    std::string crt = dir + "/" + stem + ".crt", key = dir + "/" + stem + ".key";
    WriteFile(crt, r->cert_pem);
    WriteFile(key, r->key_pem);
    return {crt, key};
  }
};

inline std::shared_ptr<TlsContext> MakeTls(TlsOptions o) {
  auto r = TlsContext::Create(std::move(o));
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : nullptr;
}

inline TlsOptions InternalTls(const std::string& cert, const std::string& key,
                              const std::string& ca) {
  TlsOptions o;
  o.role = Role::kInternal;
  o.cert_file = cert;
  o.key_file = key;
  o.ca_file = ca;
  o.cert_var = "FELIX_INTERNAL_TLS_CERT";
  o.key_var = "FELIX_INTERNAL_TLS_KEY";
  o.ca_var = "FELIX_INTERNAL_TLS_CA";
  return o;
}

inline HostPort Loopback() {
  return HostPort{"127.0.0.1", 0};
}

template <typename T>
T Await(std::future<T>& f, std::chrono::seconds limit = kWait) {
  if (f.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "timed out waiting";
    std::abort();
  }
  return f.get();
}

// Runs fn on the endpoint's loop thread and waits for its result.
template <typename F>
auto OnLoop(Endpoint& ep, F fn) -> decltype(fn()) {
  using R = decltype(fn());
  auto p = std::make_shared<std::promise<R>>();
  auto f = p->get_future();
  ep.Post([p, fn = std::move(fn)]() mutable {
    if constexpr (std::is_void_v<R>) {
      fn();
      p->set_value();
    } else {
      p->set_value(fn());
    }
  });
  return Await(f);
}

// Dials and waits for the outcome.
inline Result<std::shared_ptr<Connection>> DialAndWait(Endpoint& ep, const HostPort& to,
                                                       std::string server_name = "") {
  auto p = std::make_shared<std::promise<Result<std::shared_ptr<Connection>>>>();
  auto f = p->get_future();
  ep.Dial(to, DialOptions{std::move(server_name)},
          [p](Result<std::shared_ptr<Connection>> r) { p->set_value(std::move(r)); });
  return Await(f);
}

// A listener endpoint that echoes every bidi stream (and records accepted connections).
struct EchoServer {
  std::shared_ptr<std::promise<std::shared_ptr<Connection>>> first =
      std::make_shared<std::promise<std::shared_ptr<Connection>>>();
  std::unique_ptr<Endpoint> ep;

  EchoServer(std::shared_ptr<TlsContext> tls, MetricsRegistry& metrics, EndpointOptions base = {}) {
    base.tls = std::move(tls);
    auto first_p = first;
    auto fired = std::make_shared<bool>(false);
    ListenHandlers lh;
    lh.on_connection = [first_p, fired](const std::shared_ptr<Connection>& c) {
      c->SetHandlers(ConnectionHandlers{[](const std::shared_ptr<Stream>& s) {
                                          s->SetHandlers(StreamHandlers{
                                              [](Stream& st, std::span<const uint8_t> d) {
                                                if (!st.is_unidirectional()) (void)st.Write(d);
                                                st.Consume(d.size());
                                              },
                                              [](Stream& st) {
                                                if (!st.is_unidirectional()) st.Finish();
                                              },
                                              nullptr, nullptr});
                                        },
                                        nullptr});
      if (!*fired) {
        *fired = true;
        first_p->set_value(c);
      }
    };
    auto r = Endpoint::Create(Loopback(), std::move(base), metrics, lh);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    ep = std::move(*r);
  }
  HostPort addr() const { return ep->local_address(); }
};

inline std::unique_ptr<Endpoint> MakeDialer(std::shared_ptr<TlsContext> tls,
                                            MetricsRegistry& metrics, EndpointOptions base = {}) {
  base.tls = std::move(tls);
  if (base.name.empty()) base.name = "dialer";
  auto r = Endpoint::Create(Loopback(), std::move(base), metrics, std::nullopt);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? std::move(*r) : nullptr;
}

// Sends `payload` on a new bidi stream, finishes, and collects the whole reply.
inline std::string EchoRoundTrip(Endpoint& ep, const std::shared_ptr<Connection>& conn,
                                 const std::string& payload) {
  auto p = std::make_shared<std::promise<std::string>>();
  auto f = p->get_future();
  auto got = std::make_shared<std::string>();
  auto keep = std::make_shared<std::shared_ptr<Stream>>();
  ep.Post([conn, payload, p, got, keep] {
    auto s = conn->OpenBidiStream();
    if (!s) {
      p->set_value("open failed: " + s.error().message);
      return;
    }
    *keep = *s;
    (*s)->SetHandlers(StreamHandlers{[got](Stream& st, std::span<const uint8_t> d) {
                                       got->append(reinterpret_cast<const char*>(d.data()),
                                                   d.size());
                                       st.Consume(d.size());
                                     },
                                     [p, got, keep](Stream&) {
                                       p->set_value(*got);
                                       keep->reset();
                                     },
                                     [p, keep](Stream&, uint64_t code) {
                                       p->set_value("reset " + std::to_string(code));
                                       keep->reset();
                                     },
                                     nullptr});
    (void)(*s)->Write(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()));
    (*s)->Finish();
  });
  return Await(f);
}

}  // namespace felix::transport::test
