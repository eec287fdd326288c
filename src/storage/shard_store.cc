#include "storage/shard_store.h"

#include "storage/io_util.h"

namespace felix::storage {

const char* LogKindName(LogKind kind) {
  switch (kind) {
    case LogKind::kStream:
      return "stream";
    case LogKind::kCache:
      return "cache";
    case LogKind::kCursors:
      return "cursors";
    case LogKind::kDeadLetters:
      return "dead_letters";
    case LogKind::kCounters:
      return "counters";
    case LogKind::kProducers:
      return "producers";
  }
  return "unknown";
}

std::optional<LogKind> ParseLogKind(std::string_view name) {
  for (size_t i = 0; i < kLogKindCount; ++i) {
    if (name == LogKindName(LogKind(i))) return LogKind(i);
  }
  return std::nullopt;
}

ShardStoreOptions ShardStoreOptions::Uniform(const LogOptions& options) {
  ShardStoreOptions o;
  for (auto& l : o.logs) l = options;
  return o;
}

StorageResult<std::unique_ptr<ShardStore>> ShardStore::Open(const std::string& dir,
                                                            ShardStoreOptions options) {
  if (auto r = MakeDirectories(dir); !r) return tl::unexpected(r.error());
  std::unique_ptr<ShardStore> store(new ShardStore());
  store->dir_ = dir;
  if (auto loaded = store->LoadReplicaState(); !loaded) return tl::unexpected(loaded.error());
  for (size_t i = 0; i < kLogKindCount; ++i) {
    LogOptions o = options.logs[i];
    if (o.metrics_label == "log") o.metrics_label = LogKindName(LogKind(i));
    auto log = DurableLog::Open(dir + "/" + LogKindName(LogKind(i)), std::move(o));
    if (!log) return tl::unexpected(log.error());
    store->logs_[i] = std::move(*log);
    // §20: held from the first moment, until replication (or a broker without it) decides.
    store->logs_[i]->SetRetentionHold(store->replica_.retention_held);
  }
  return store;
}

namespace {

constexpr const char* kReplicaFile = "replica";
constexpr const char* kBallotFile = "ballot";
constexpr const char* kEpochsFile = "epochs";

// The file's bytes, nullopt when it does not exist.
StorageResult<std::optional<std::vector<uint8_t>>> ReadIfPresent(const std::string& path) {
  if (!FileExists(path)) return std::optional<std::vector<uint8_t>>{};
  auto bytes = ReadWholeFile(path);
  if (!bytes) return tl::unexpected(bytes.error());
  return std::optional<std::vector<uint8_t>>(std::move(*bytes));
}

StorageError InFile(StorageError error, const std::string& path) {
  error.file = path;
  error.message += " (" + path + ")";
  return error;
}

}  // namespace

StorageResult<void> ShardStore::LoadReplicaState() {
  std::string replica_path = dir_ + "/" + kReplicaFile;
  auto replica = ReadIfPresent(replica_path);
  if (!replica) return tl::unexpected(replica.error());
  if (*replica) {
    auto decoded = DecodeReplicaState(**replica);
    if (!decoded) return tl::unexpected(InFile(decoded.error(), replica_path));
    replica_ = *decoded;
  }
  std::string ballot_path = dir_ + "/" + kBallotFile;
  auto ballot = ReadIfPresent(ballot_path);
  if (!ballot) return tl::unexpected(ballot.error());
  if (*ballot) {
    auto decoded = DecodeBallot(**ballot);
    if (!decoded) return tl::unexpected(InFile(decoded.error(), ballot_path));
    // A ballot one above the replica file is a raise that crashed between the two writes.
    if (decoded->generation == replica_.generation.next())
      replica_.generation = decoded->generation;
    if (decoded->generation == replica_.generation) ballot_ = *decoded;
  }
  auto epochs = ReadIfPresent(dir_ + "/" + kEpochsFile);
  if (!epochs) return tl::unexpected(epochs.error());
  if (*epochs) history_ = GenerationHistory::Decode(**epochs, &epochs_defect_);
  return {};
}

StorageResult<void> ShardStore::WriteReplica(const ReplicaState& state) {
  auto bytes = EncodeReplicaState(state);
  return WriteFileAtomic(dir_, kReplicaFile, bytes, /*sync=*/true);
}

StorageResult<void> ShardStore::AcceptGeneration(Generation generation, const std::string& leader,
                                                 std::optional<Offset> start_offset) {
  if (generation <= replica_.generation) {
    return StorageFail(StorageErrc::kInvalidArgument, "generation " + to_string(generation) +
                                                          " is not above the accepted " +
                                                          to_string(replica_.generation));
  }
  Ballot ballot{generation, leader};
  auto ballot_bytes = EncodeBallot(ballot);
  if (!ballot_bytes) return tl::unexpected(ballot_bytes.error());
  if (auto w = WriteFileAtomic(dir_, kBallotFile, *ballot_bytes, true); !w) return w;
  ReplicaState next = replica_;
  next.generation = generation;
  if (auto w = WriteReplica(next); !w) return w;
  replica_ = next;
  ballot_ = std::move(ballot);
  if (start_offset && history_.Record(generation, *start_offset)) {
    // Advisory: a failed write costs automatic divergence repair, never a record.
    (void)WriteFileAtomic(dir_, kEpochsFile, history_.Encode(), true);
  }
  return {};
}

StorageResult<void> ShardStore::RelabelGenerations(Offset from,
                                                   std::span<const EpochEntry> entries) {
  bool changed = history_.TruncateFrom(from);
  for (const EpochEntry& e : entries) changed |= history_.Record(e.generation, e.start_offset);
  if (!changed) return {};
  return WriteFileAtomic(dir_, kEpochsFile, history_.Encode(), true);
}

StorageResult<void> ShardStore::SetCommitOffset(Offset commit_offset) {
  if (commit_offset <= replica_.commit_offset) return {};
  ReplicaState next = replica_;
  next.commit_offset = commit_offset;
  // A follower writes this through before each ReplicateOk under on_commit: rewriting the
  // 28-byte file in place costs one flush, where temp + rename + directory sync cost three
  // and a journal commit (docs/storage-format.md, "replica").
  auto bytes = EncodeReplicaState(next);
  if (auto w = OverwriteFileInPlace(dir_, kReplicaFile, bytes); !w) return w;
  replica_ = next;
  return {};
}

StorageResult<void> ShardStore::SetRetentionHold(bool held) {
  for (auto& l : logs_) l->SetRetentionHold(held);
  if (replica_.retention_held == held) return {};
  ReplicaState next = replica_;
  next.retention_held = held;
  if (auto w = WriteReplica(next); !w) return w;
  replica_ = next;
  return {};
}

ShardStore::~ShardStore() {
  (void)Close();
}

StorageResult<void> ShardStore::Close() {
  StorageResult<void> first;
  for (auto& l : logs_) {
    if (!l) continue;
    auto r = l->Close();
    if (!r && first) first = r;
  }
  return first;
}

}  // namespace felix::storage
