// One request on a bidirectional stream of its own: `auth`, the request, one answer
// (client-protocol.md §1.2 "Group / range / time request stream"). Consumer-group calls
// (groups.cc) use it; implemented in client.cc, where the connection lives.
//
// Thread-safe: may be called from any thread except the client's I/O thread (it blocks).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "felix/client.h"
#include "wire/flx1/messages.h"

namespace felix::client_impl {

// Sends `request` and waits up to `timeout` for the broker's answer (the first frame after
// the auth answer). A refused auth, a broken connection or a stream ended without an answer
// are errors; an `error` answer is returned as a message for the caller to map.
ClientResult<wire::flx1::Message> ExchangeOnOwnStream(Client::Impl& impl,
                                                      const wire::flx1::Message& request,
                                                      std::chrono::milliseconds timeout);
// The same for several requests without waiting, each on its own stream, all handed to the
// client's I/O thread in one post. Each `done` runs exactly once: on the I/O thread with what
// the blocking form would return (no timeout of its own: the caller bounds its wait), or at
// once on this thread when its request cannot be encoded or the client is closed.
struct OwnStreamRequest {
  wire::flx1::Message request;
  std::function<void(ClientResult<wire::flx1::Message>)> done;
};
void StartExchangesOnOwnStreams(Client::Impl& impl, std::vector<OwnStreamRequest> requests);
const ClientOptions& OptionsOf(const Client::Impl& impl);
uint32_t ServerFeaturesOf(const Client::Impl& impl);
uint64_t NextRequestId(Client::Impl& impl);

}  // namespace felix::client_impl
