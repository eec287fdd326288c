#include "broker/cache_path.h"

namespace felix::broker {

auth::Action CacheActionOf(CacheCommand::Op op) {
  return op == CacheCommand::Op::kGet || op == CacheCommand::Op::kCounterGet
             ? auth::Action::kCacheRead
             : auth::Action::kCacheWrite;
}

const char* CacheAuthorizationRefusal(const auth::AuthContext& auth, auth::Action action,
                                      std::string_view tenant, std::string_view ns,
                                      std::string_view cache, std::string_view key) {
  if (tenant != auth.tenant_id) return "tenant mismatch";
  if (!auth.permissions.AllowsCacheKey(action, tenant, ns, cache,
                                       auth::CacheKey{auth::CacheKey::Kind::kKey, key})) {
    return "forbidden";
  }
  return nullptr;
}

namespace {

// A conditional put or delete: decided against the live entry now, written only if it holds.
void RunConditional(CacheShard& shard, CacheCommand command, CacheCommandDone done) {
  using Op = CacheCommand::Op;
  if (command.op != Op::kPut && command.op != Op::kDelete) {
    return done(tl::unexpected(
        Error{ErrorCode::kInvalidArgument, "a condition applies to a put or a delete only"}));
  }
  if (shard.WriteInFlight(command.key)) {
    // semantics.md §10: a pending write to the key is awaited first, so two racing conditional
    // writes never decide on the same state. The shard outlives its pending writes.
    std::string key = command.key;
    CacheShard* on = &shard;
    return shard.WhenKeyIdle(key,
                             [on, command = std::move(command), done = std::move(done)]() mutable {
                               RunConditional(*on, std::move(command), std::move(done));
                             });
  }
  std::optional<uint64_t> current = shard.VersionOf(command.key);
  const CacheCondition& c = *command.condition;
  bool holds = c.type == CacheCondition::Type::kAbsent ? !current.has_value()
                                                       : current == std::optional(c.version);
  if (!holds) return done(CacheCommandResult{std::nullopt, std::nullopt, false, current});
  command.condition.reset();
  std::string key = command.key;
  CacheShard* on = &shard;  // the shard outlives its pending writes (cache_shard.h)
  RunCacheCommand(shard, std::move(command),
                  [on, key, done = std::move(done)](Result<CacheCommandResult> written) {
                    if (written) written->version = on->VersionOf(key);  // applied just now
                    done(std::move(written));
                  });
}

}  // namespace

void RunCacheCommand(CacheShard& shard, CacheCommand command, CacheCommandDone done) {
  using Op = CacheCommand::Op;
  if (command.condition) return RunConditional(shard, std::move(command), std::move(done));
  switch (command.op) {
    case Op::kPut:
      return shard.Put(std::move(command.key), std::move(command.value), command.ttl_ms,
                       [done = std::move(done)](Result<void> written) {
                         if (!written) return done(tl::unexpected(written.error()));
                         done(CacheCommandResult{});
                       });
    case Op::kGet: {
      CacheCommandResult result{shard.Get(command.key), std::nullopt, true, std::nullopt};
      if (command.want_version && result.value) result.version = shard.VersionOf(command.key);
      return done(std::move(result));
    }
    case Op::kDelete:
      return shard.Delete(std::move(command.key),
                          [done = std::move(done)](Result<std::optional<std::string>> removed) {
                            if (!removed) return done(tl::unexpected(removed.error()));
                            done(CacheCommandResult{std::move(*removed), std::nullopt});
                          });
    case Op::kCounterAdd:
      return shard.CounterAdd(std::move(command.key), command.delta,
                              [done = std::move(done)](Result<int64_t> sum) {
                                if (!sum) return done(tl::unexpected(sum.error()));
                                done(CacheCommandResult{std::nullopt, *sum});
                              });
    case Op::kCounterGet: {
      auto sum = shard.CounterGet(command.key);
      if (!sum) return done(tl::unexpected(sum.error()));
      return done(CacheCommandResult{std::nullopt, *sum});
    }
  }
}

void RunCacheCommandWhenOpen(ShardCell<OpenedCache>& cell, CacheCommand command,
                             CacheCommandDone done) {
  cell.WhenOpen(
      [command = std::move(command), done = std::move(done)](Result<OpenedCache*> opened) mutable {
        if (!opened) return done(tl::unexpected(opened.error()));
        RunCacheCommand(*(*opened)->shard, std::move(command), std::move(done));
      });
}

}  // namespace felix::broker
