#include "cluster/controller_pass.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "cluster/move_plan.h"
#include "cluster/restore_plan.h"

namespace felix::cluster {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

struct Wanted {
  ShardRef ref;
  uint32_t replication_factor = 1;
};

// Every shard of every readable catalog entity, and the entities that are present but
// unreadable (their assignments are left alone).
std::vector<Wanted> WantedShards(const ControllerView& view) {
  std::vector<Wanted> wanted;
  for (const auto& [entity, shape] : view.catalog()) {
    if (!shape) continue;
    for (uint32_t i = 0; i < shape->shards; ++i) {
      wanted.push_back({ShardRef{entity.kind, entity.tenant, entity.ns, entity.name, i},
                        shape->replication_factor});
    }
  }
  return wanted;
}

// One shard's transactions: `plan(read)` is what to commit (nullopt: nothing to do), `commit`
// runs it as one controller txn, `done` accounts for a committed one. A lost race re-plans from
// the value the failed txn returned. False when the pass must end (deposed, or paused because
// the lease is not usable).
template <typename PlanFn, typename CommitFn, typename DoneFn>
bool Converge(const std::string& key, AssignmentRead read, const PassOptions& options,
              PassResult& result, PlanFn plan, CommitFn commit, DoneFn done) {
  for (int attempt = 0;; ++attempt) {
    auto next = plan(read);
    if (!next) return true;
    if (attempt >= options.max_attempts) {
      ++result.errors;
      spdlog::warn("controller: {} still racing after {} attempts", key, attempt);
      return true;
    }
    if (options.can_write && !options.can_write()) {
      result.paused = true;
      return false;
    }
    Result<WriteOutcome> out = commit(read, *next);
    if (!out) {
      ++result.errors;
      spdlog::warn("controller: transaction on {} failed: {}", key, out.error().ToString());
      return true;
    }
    switch (out->kind) {
      case WriteOutcome::Kind::kDeposed:
        result.deposed = true;
        return false;
      case WriteOutcome::Kind::kWritten:
        result.written_revision = std::max(result.written_revision, out->current.mod_revision);
        done(*next, out->current);
        return true;
      case WriteOutcome::Kind::kLostRace:
        ++result.lost_races;
        read = std::move(out->current);
        break;
      case WriteOutcome::Kind::kNodeReturned:
        // Planned from a view in which the node was down; the next pass sees it registered.
        ++result.leaders_returned;
        spdlog::info("controller: {} not failed over: its leader registered again", key);
        return true;
    }
  }
}

bool Obsolete(const ControllerView& view, const ShardRef& ref) {
  auto it = view.catalog().find(EntityOf(ref));
  if (it == view.catalog().end()) return true;  // the stream/cache left the catalog
  if (!it->second) return false;                // unreadable: leave alone
  return ref.shard >= it->second->shards;
}

}  // namespace

std::optional<Assignment> PlanShard(const std::optional<Assignment>& current,
                                    const ReplicaSet* target, uint32_t replication_factor,
                                    const std::set<std::string>& registered) {
  if (!target) return std::nullopt;  // nowhere to place
  if (!current) {
    Assignment next;
    next.leader = target->leader;
    next.replicas.push_back(target->leader);
    next.replicas.insert(next.replicas.end(), target->followers.begin(), target->followers.end());
    return next;
  }
  // Moving and unavailable shards belong to the move and failover logic (later issues), and a
  // shard with a follower joining to the restore plan.
  if (current->state != AssignmentState::kActive || current->leader.empty() || current->joining) {
    return std::nullopt;
  }

  // The current leader stays, alive or not: a live leader only ever changes through a move,
  // and a dead one through failover once DownTracker declares its node down. Both hook in
  // here; until then the controller never hands a led shard to another leader.
  const std::string& leader = current->leader;
  const size_t want = replication_factor > 0 ? replication_factor - 1 : 0;
  std::vector<std::string> followers;
  for (const auto& r : current->replicas) {
    if (r != leader && !registered.contains(r) && !Contains(followers, r)) followers.push_back(r);
  }
  std::vector<std::string> candidates;
  candidates.push_back(target->leader);
  candidates.insert(candidates.end(), target->followers.begin(), target->followers.end());
  for (const auto& c : candidates) {
    if (c != leader && !Contains(followers, c)) followers.push_back(c);
  }
  if (followers.size() > want) followers.resize(want);

  std::vector<std::string> before;
  for (const auto& r : current->replicas) {
    if (r != leader) before.push_back(r);
  }
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  if (sorted(before) == sorted(followers) && Contains(current->replicas, leader)) {
    return std::nullopt;
  }
  Assignment next;
  next.leader = leader;
  next.replicas.push_back(leader);
  next.replicas.insert(next.replicas.end(), followers.begin(), followers.end());
  return next;
}

std::optional<Assignment> PlanFailover(const std::optional<Assignment>& current,
                                       const Report* report, const std::set<std::string>& down,
                                       const std::set<std::string>& registered) {
  if (!current || current->state == AssignmentState::kUnavailable || current->leader.empty() ||
      !down.contains(current->leader)) {
    return std::nullopt;
  }
  // A fenced move's generation writes nothing (move_plan.h): the report of the generation before
  // it is as good as one at it. (The drain's own report, at the fence generation, is stronger.)
  const bool fenced = current->state == AssignmentState::kMoving;
  if (!report || report->leader != current->leader ||
      (report->generation != current->generation &&
       !(fenced && report->generation + 1 == current->generation))) {
    return std::nullopt;
  }
  const std::string* best = nullptr;
  uint64_t best_durable = 0;
  for (const auto& node : current->replicas) {
    if (node == current->leader || !Contains(report->caught_up, node) ||
        !registered.contains(node) || down.contains(node)) {
      continue;
    }
    auto d = report->durable.find(node);
    const uint64_t durable = d == report->durable.end() ? 0 : d->second;
    if (!best || durable > best_durable) {
      best = &node;
      best_durable = durable;
    }
  }
  if (!best) return std::nullopt;
  Assignment next;
  next.leader = *best;
  next.replicas.push_back(*best);
  const bool keep_joiner =
      current->joining && (*current->joining == *best || (current->replicas.size() - 1) % 2 == 0);
  for (const auto& node : current->replicas) {
    if (node == *best) continue;
    if (current->joining && node == *current->joining && !keep_joiner) continue;
    next.replicas.push_back(node);
  }
  return next;
}

PassResult RunPass(etcd::EtcdClient& etcd, const ControllerTerm& term, const ControllerView& view,
                   const PassOptions& options) {
  PassResult result;
  const ClusterKeys& keys = view.keys();
  const std::set<std::string> registered = view.RegisteredIds();
  const std::vector<Wanted> wanted = WantedShards(view);

  PlacementInput input;
  for (const auto& [id, record] : view.nodes()) {
    if (record) input.nodes.push_back({id, record->zone});
  }
  for (const auto& w : wanted) {
    const std::string path = w.ref.Path();
    input.shards.push_back({path, w.replication_factor});
    auto slot = view.assignments().find(w.ref);
    if (slot == view.assignments().end() || !slot->second.read.value) continue;
    const Assignment& a = *slot->second.read.value;
    if (a.leader.empty()) continue;
    ReplicaSet current{a.leader, {}};
    for (const auto& r : a.replicas) {
      if (r != a.leader) current.followers.push_back(r);
    }
    input.current.emplace(path, std::move(current));
  }
  const PlacementResult target = Place(input);
  result.unplaced = target.unplaced;
  std::set<ShardRef> finished_moves;  // cut over or retaken in this pass: their requests go

  for (const auto& w : wanted) {
    const std::string key = keys.Assign(w.ref);
    AssignmentRead read;
    if (auto slot = view.assignments().find(w.ref); slot != view.assignments().end()) {
      if (slot->second.corrupt) {
        ++result.skipped;
        continue;
      }
      read = slot->second.read;
    }
    auto t = target.assignment.find(w.ref.Path());
    const ReplicaSet* shard_target = t == target.assignment.end() ? nullptr : &t->second;
    auto report_it = view.reports().find(w.ref);
    const Report* report = report_it == view.reports().end() ? nullptr : &report_it->second;
    bool failover = false;
    bool restore = false;
    std::optional<MoveAction> move;
    auto request_it = view.moves().find(w.ref);
    MoveInputs move_in;
    move_in.report = report;
    move_in.request = request_it == view.moves().end() ? nullptr : &request_it->second;
    move_in.draining = &view.drains();
    move_in.down = &options.down;
    move_in.registered = &registered;
    move_in.fence_expired = options.fence_expired.contains(w.ref);
    move_in.replication_factor = w.replication_factor;
    const std::string shard_path = w.ref.Path();
    RestoreInputs restore_in;
    restore_in.report = report;
    restore_in.lost = &options.lost;
    restore_in.down = &options.down;
    restore_in.registered = &registered;
    restore_in.replication_factor = w.replication_factor;
    restore_in.shard_key = shard_path;
    auto plan = [&](const AssignmentRead& r) {
      auto promoted = PlanFailover(r.value, report, options.down, registered);
      failover = promoted.has_value();
      if (promoted) return promoted;
      move.reset();
      if (auto moved = PlanMove(r.value, move_in)) {
        move = moved->action;
        return std::optional<Assignment>(std::move(moved->next));
      }
      auto restored = PlanRestore(r.value, restore_in);
      restore = restored.has_value();
      if (restored) return restored;
      return PlanShard(r.value, shard_target, w.replication_factor, registered);
    };
    auto commit = [&](const AssignmentRead& r, const Assignment& next) {
      // A failover lands only while the deposed leader is still unregistered (assignment_txn.h).
      return WriteAssignment(etcd, keys, term, key, r, next,
                             failover ? keys.Node(r.value->leader) : std::string());
    };
    auto done = [&](const Assignment& next, const AssignmentRead& written) {
      ++result.writes;
      if (failover) ++result.promotions;
      if (restore) ++result.restores;
      if (move) {
        ++result.move_steps;
        if (*move != MoveAction::kFence) finished_moves.insert(w.ref);
        spdlog::info("controller: move of {} {}: generation={} leader={} replicas={}{}",
                     w.ref.Path(), MoveActionName(*move), written.value->generation, next.leader,
                     Join(next.replicas), next.move ? " target=" + next.move->target : "");
        return;
      }
      spdlog::info("controller: {} {} generation={} leader={} replicas={}{}",
                   failover  ? "failed over"
                   : restore ? "restoring replicas of"
                             : "assigned",
                   w.ref.Path(), written.value->generation, next.leader, Join(next.replicas),
                   next.joining ? " joining=" + *next.joining : std::string());
    };
    if (!Converge(key, read, options, result, plan, commit, done)) return result;
    if (read.value && read.value->state == AssignmentState::kActive &&
        options.down.contains(read.value->leader) && !failover &&
        !PlanFailover(read.value, report, options.down, registered)) {
      result.leaderless.push_back(w.ref.Path());
    }
  }

  // Move requests that are done (cut over or retaken now, or the target already leads), that
  // name no replica, or whose shard is gone, are deleted (a plain delete: the request is the
  // operator's, not a placement; a deposed controller deleting one loses nothing).
  for (const auto& [ref, request] : view.moves()) {
    auto slot = view.assignments().find(ref);
    const Assignment* a = slot == view.assignments().end() || !slot->second.read.value
                              ? nullptr
                              : &*slot->second.read.value;
    const bool stale = Obsolete(view, ref) || !registered.contains(request.target);
    const bool done = finished_moves.contains(ref) ||
                      (a && a->state == AssignmentState::kActive && a->leader == request.target);
    if (!stale && !done) continue;
    if (auto deleted = etcd.Delete(keys.Move(ref)); !deleted) {
      ++result.errors;
      spdlog::warn("controller: cannot delete the move request of {}: {}", ref.Path(),
                   deleted.error().message);
    } else if (stale) {
      spdlog::warn("controller: dropped the move request of {} to {}: {}", ref.Path(),
                   request.target,
                   Obsolete(view, ref) ? "the shard is gone" : "the target is not registered");
    }
  }

  for (const auto& entry : view.assignments()) {
    const ShardRef& ref = entry.first;  // a named reference: lambdas below capture it
    if (!Obsolete(view, ref)) continue;
    const std::string key = keys.Assign(ref);
    auto plan = [](const AssignmentRead& r) {
      return r.mod_revision != 0 ? std::optional<bool>(true) : std::nullopt;  // still there
    };
    auto commit = [&](const AssignmentRead& r, bool) {
      return DeleteAssignment(etcd, keys, term, key, r);
    };
    auto done = [&](bool, const AssignmentRead&) {
      ++result.deletes;
      spdlog::info("controller: unassigned {} (left the catalog)", ref.Path());
    };
    if (!Converge(key, entry.second.read, options, result, plan, commit, done)) return result;
  }
  return result;
}

}  // namespace felix::cluster
