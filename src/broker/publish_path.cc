#include "broker/publish_path.h"

namespace felix::broker {

const char* AuthorizationRefusal(const auth::AuthContext& auth, auth::Action action,
                                 std::string_view tenant, std::string_view ns,
                                 std::string_view stream) {
  if (tenant != auth.tenant_id) return "tenant mismatch";
  if (!auth.permissions.AllowsStream(action, tenant, ns, stream)) return "forbidden";
  return nullptr;
}

void PublishWhenOpen(ShardCell<OpenedStream>& cell, PayloadBatch batch,
                     StreamShard::PublishDone done) {
  cell.WhenOpen(
      [batch = std::move(batch), done = std::move(done)](Result<OpenedStream*> opened) mutable {
        if (!opened) return done(tl::unexpected(opened.error()));
        (*opened)->shard->Publish(std::move(batch), std::move(done));
      });
}

}  // namespace felix::broker
