// IoThread: one loop thread for the connections of several Clients (include/felix/client.h).
#include "client/io_thread.h"

#include "client/error_mapping.h"
#include "common/metrics.h"
#include "transport/tls_context.h"

namespace felix {

IoThread::IoThread(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

IoThread::~IoThread() {
  if (impl_ && impl_->host) impl_->host->Stop();
}

ClientResult<std::shared_ptr<IoThread>> IoThread::Create() {
  // The host endpoint only lends its loop: the connections are the guests' own, each with
  // the TLS settings of its Client. It needs a TLS context all the same; one that presents
  // and trusts nothing is enough, as it never dials or accepts.
  transport::TlsOptions tls;
  tls.role = transport::Role::kClient;
  tls.no_certificate = true;
  auto ctx = transport::TlsContext::Create(tls);
  if (!ctx) {
    return tl::unexpected(
        client_impl::FromTransport(ctx.error(), "client I/O thread", RetryClass::kFatal));
  }
  transport::EndpointOptions eo;
  eo.tls = *ctx;
  eo.name = "client-io";
  static_assert(IoThread::kMaxConnections <= transport::kMaxLoopGuests);
  auto metrics = std::make_unique<MetricsRegistry>();
  auto host = transport::Endpoint::Create(HostPort{"127.0.0.1", 0}, eo, *metrics, std::nullopt);
  if (!host) {
    return tl::unexpected(
        client_impl::FromTransport(host.error(), "client I/O thread", RetryClass::kFatal));
  }
  auto impl = std::make_unique<Impl>();
  impl->metrics = std::move(metrics);
  impl->host = std::move(*host);
  return std::shared_ptr<IoThread>(new IoThread(std::move(impl)));
}

}  // namespace felix
