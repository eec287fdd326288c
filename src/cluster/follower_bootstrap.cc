// ReplicaFollower's bootstrap (kinds 10/15/17/19/21, replication.md §12, cluster-etcd.md §7
// item 3) and rebuild (kind 24, §13, §7 item 4): the two messages that move a log's base.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster/follower_impl.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using storage::LogKind;

FollowerAnswer ReplicaFollower::ApplyBootstrap(const flxi::Bootstrap& bootstrap, LogKind log,
                                               FollowerRole role, std::string_view sender) {
  const std::string where = Impl::Where(bootstrap.shard, log);
  if (auto refused = Impl::Admit(*this, bootstrap.shard, log, role, sender, where)) {
    return Impl::Finish(*this, std::move(*refused));
  }
  LogState& st = logs_[size_t(log)];
  Impl::TrackLeader(st, Generation(bootstrap.shard.generation));
  storage::DurableLog& l = store_.log(log);
  const Offset base = l.BaseOffset();
  const Offset tail = follower::Tail(l);
  const Offset offered(bootstrap.base_offset);
  const std::string shape = " (log [" + to_string(base) + ", " + to_string(tail) +
                            "), offered base " + to_string(offered) + ")";
  if (st.halt != FollowerHalt::kNone) {
    return Impl::Finish(*this, Impl::Error(flxi::ErrorCode::kLogConflict, tail,
                                           where + ": halted until a rebuild" + shape, "refused"));
  }
  if (tail == base && offered > base) {
    // An empty log below the offered base is placed there (nothing is discarded).
    if (auto reset = l.Reset(offered); !reset) {
      return Impl::Finish(*this, Impl::StorageFailed(where, reset.error()));
    }
    st.durable_offset = offered;
    spdlog::info("replication: {}: bootstrapped at {}", where, offered);
    return Impl::Finish(*this, Impl::Ok(offered, "bootstrapped"));
  }
  if (base <= offered && offered <= tail) {
    // Records an older generation wrote here above the commit offset, below the offered base:
    // this leader no longer holds them to compare (its compaction or retention deleted them),
    // and they must be compared before anything lands after them (§5 step 5) — answered with
    // the tail, the leader would be sent back below its base again and again. Refused, the
    // leader halts this log and a rebuild places it at the base (found by a Quorum fault run
    // with 64 KiB segments: a cache shard's old leader never caught up with the new one).
    if (auto from = Impl::UncomparedFrom(*this, st, log, Generation(bootstrap.shard.generation));
        from && *from < offered) {
      return Impl::Finish(*this, Impl::Error(flxi::ErrorCode::kLogConflict, tail,
                                             where + ": records from " + to_string(*from) +
                                                 " of an older generation are not compared yet "
                                                 "and lie below the offered base" +
                                                 shape,
                                             "refused"));
    }
    // The records span the offered base: shipping continues from the tail.
    if (auto d = follower::EnsureDurable(l, tail); !d) {
      return Impl::Finish(*this, Impl::StorageFailed(where, d.error()));
    }
    st.durable_offset = tail;
    return Impl::Finish(*this, Impl::Ok(tail, "bootstrapped"));
  }
  // A log ending before the offered base (a hole) or beginning after it: never placed over.
  return Impl::Finish(*this, Impl::Error(flxi::ErrorCode::kLogConflict, tail,
                                         where +
                                             ": a log placed at the offered base would not "
                                             "join the records held" +
                                             shape,
                                         "refused"));
}

FollowerAnswer ReplicaFollower::ApplyRebuild(const flxi::Rebuild& rebuild, FollowerRole role,
                                             std::string_view sender) {
  const LogKind log = StorageLog(rebuild.log);
  const std::string where = Impl::Where(rebuild.shard, log);
  if (auto refused = Impl::Admit(*this, rebuild.shard, log, role, sender, where)) {
    return Impl::Finish(*this, std::move(*refused));
  }
  const Generation g(rebuild.shard.generation);
  LogState& st = logs_[size_t(log)];
  Impl::TrackLeader(st, g);
  st.verified_through.reset();  // whatever is kept is compared again
  storage::DurableLog& l = store_.log(log);
  const bool own = log == Impl::OwnLog(*this);
  const Offset base = l.BaseOffset();
  const Offset tail = follower::Tail(l);
  const Offset commit = own ? Impl::CommitOffset(*this) : l.CommitOffset();
  const Offset leader_base(rebuild.base_offset);
  const Offset from = std::max(base, leader_base);

  if (from >= commit || tail <= from) {
    // Discarding from `from` cuts nothing committed: a fresh copy begins at the leader's base.
    if (auto reset = l.Reset(leader_base); !reset) {
      return Impl::Finish(*this, Impl::StorageFailed(where, reset.error()));
    }
    if (own) (void)store_.RelabelGenerations(Offset(0), {});  // advisory: the history goes too
    st.halt = FollowerHalt::kNone;
    st.halt_detail.clear();
    st.durable_offset = leader_base;
    spdlog::warn("replication: {}: rebuilt from {} for generation {} (discarded [{}, {}))", where,
                 leader_base, g, base, tail);
    return Impl::Finish(*this, Impl::Ok(leader_base, "rebuilt"));
  }
  if (st.committed_mismatch_generation == g) {
    // This leader already disagreed with a committed record here: discarding cannot agree.
    return Impl::Finish(*this, Impl::Error(flxi::ErrorCode::kLogConflict, tail,
                                           where + ": generation " + to_string(g) +
                                               " disagreed with a record below the commit offset " +
                                               to_string(commit) + "; a rebuild would discard it",
                                           "below_commit"));
  }
  // Keep everything below min(commit, tail), drop only what lies above; the leader re-ships from
  // `from` and every kept record is compared before anything lands after it.
  // (A tail below the commit offset — a crash under periodic fsync, or a log re-placed below
  // its old base — keeps everything: there is nothing above to drop.)
  const Offset keep = std::min(commit, tail);
  if (keep < tail) {
    if (auto cut = l.Truncate(keep); !cut) {
      return Impl::Finish(*this, Impl::StorageFailed(where, cut.error()));
    }
  }
  if (own) (void)store_.RelabelGenerations(keep, {});  // advisory
  st.halt = FollowerHalt::kNone;
  st.halt_detail.clear();
  st.durable_offset = from;
  spdlog::warn(
      "replication: {}: rebuild for generation {} kept [{}, {}) below the commit offset, "
      "dropped [{}, {})",
      where, g, base, keep, keep, tail);
  return Impl::Finish(*this, Impl::Ok(from, "rebuilt"));
}

}  // namespace felix::cluster
