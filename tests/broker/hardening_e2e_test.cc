// Issue 12 ("single-node hardening") regression tests on the real felix-broker process: each
// reproduces an attack that used to lose data or hide a fault, and checks what the broker does
// now (docs/operations.md "What the broker does when…").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "broker/stream_groups.h"
#include "e2e_broker.h"

namespace felix::broker {
namespace {

using namespace e2e;  // NOLINT: the shared end-to-end fixture
using felix::testing::RunProgram;
namespace fs = std::filesystem;

// Segment files of a stream shard's record log, oldest first.
std::vector<fs::path> StreamSegments(const std::string& data_dir, const std::string& stream) {
  std::vector<fs::path> out;
  fs::path dir = fs::path(data_dir) / "shards" / "default" / "default" / stream / "0" / "stream";
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".log") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void FlipByte(const fs::path& file, uint64_t position) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << file;
  f.seekg(static_cast<std::streamoff>(position));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(position));
  f.write(&c, 1);
  ASSERT_TRUE(f.flush());
}

// Publishes `count` records of `size` bytes, `per_batch` to a frame, every one acknowledged.
void PublishRecords(Broker& broker, const std::string& stream, int count, size_t size,
                    int per_batch = 20) {
  auto client = broker.Connect();
  auto publisher = Authed(*client, broker.AllToken());
  int sent = 0;
  uint64_t request = 1;
  while (sent < count) {
    std::vector<std::string> payloads;
    for (int i = 0; i < per_batch && sent < count; ++i, ++sent) {
      std::string p = std::to_string(sent) + ":";
      p.resize(size, 'x');
      payloads.push_back(std::move(p));
    }
    publisher->Send(BinaryPublish(request++, stream, std::move(payloads)));
    ASSERT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk);
  }
}

// ---- Item 1: a corrupt record in a sealed segment ends the subscription with an error ----

TEST(Hardening, CorruptRecordInSealedSegmentEndsSubscriptionNamingOffsetAndFile) {
  std::string dir = MakeTempDir("felix-corrupt");
  // Small segments and a dense index: the damage lies in a sealed segment, before its last
  // index entry, where opening the log does not look.
  Broker broker(dir + "/data", {{"FELIX_DURABLE_SEGMENT_BYTES", "16384"},
                                {"FELIX_DURABLE_INDEX_SPACING_BYTES", "1024"}});
  broker.CreateStream("default", "c", /*durable=*/true);
  constexpr int kRecords = 600;
  constexpr size_t kPayload = 90;  // 130 bytes a record with its 40-byte header
  PublishRecords(broker, "c", kRecords, kPayload);
  ASSERT_EQ(broker.Stop(), 0);

  auto segments = StreamSegments(dir + "/data", "c");
  ASSERT_GE(segments.size(), 3u);
  const fs::path& damaged = segments[1];
  uint64_t base = std::stoull(damaged.stem().string());
  constexpr uint64_t kIndexInSegment = 20;
  uint64_t bad_offset = base + kIndexInSegment;
  FlipByte(damaged, 32 + kIndexInSegment * (40 + kPayload) + 40 + 50);  // a payload byte
  broker.Start();

  auto client = broker.Connect();
  auto control = Authed(*client, broker.AllToken());
  control->SendMessage(SubscribeEarliest("c"));
  auto events = client->AcceptEventStream();
  ASSERT_TRUE(events);
  ASSERT_TRUE(events->Read<flx1::EventStreamHello>());
  auto end = ReadToLastFrame(*events);
  EXPECT_TRUE(end.contiguous);  // no jump, ever
  uint64_t next = end.next;
  auto* error = end.last ? std::get_if<flx1::Error>(&*end.last) : nullptr;
  EXPECT_EQ(next, bad_offset);  // everything before the damage, nothing after
  ASSERT_NE(error, nullptr);
  EXPECT_NE(error->message.find("offset " + std::to_string(bad_offset)), std::string::npos)
      << error->message;
  EXPECT_NE(error->message.find(damaged.filename().string()), std::string::npos) << error->message;
  EXPECT_EQ(error->code, "storage");
  EXPECT_EQ(error->retry, "fatal");  // reading again fails the same way
  EXPECT_TRUE(events->WaitEnded());  // and the event stream ends

  // `felix sub` surfaces it: non-zero exit, the offset and the file on stderr.
  auto [code, output] =
      RunProgram(BuiltProgram("src/cli/felix"),
                 {"sub", "c", "--from", "earliest", "--count", std::to_string(kRecords),
                  "--credentials", dir + "/data/admin-credentials.json"});
  EXPECT_NE(code, 0);
  EXPECT_NE(output.find("offset " + std::to_string(bad_offset)), std::string::npos) << output;
  EXPECT_NE(output.find(damaged.filename().string()), std::string::npos) << output;
}

// ---- Item 3: a second broker on the same data directory is refused ----

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(Hardening, SecondBrokerOnTheDataDirectoryIsRefusedNamingTheHolderPid) {
  std::string dir = MakeTempDir("felix-twice");
  Broker first(dir + "/data");
  std::string creds_before = ReadFile(dir + "/data/admin-credentials.json");
  std::string cert_before = ReadFile(dir + "/data/tls/broker-cert.pem");
  auto [code, output] = RunProgram(BuiltProgram("src/server/felix-broker"), {},
                                   {{"FELIX_DATA_DIR", dir + "/data"},
                                    {"FELIX_QUIC_BIND", "127.0.0.1:0"},
                                    {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
                                    {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"}});
  EXPECT_EQ(code, 1);
  EXPECT_NE(output.find("in use by another broker (pid " + std::to_string(first.process().pid())),
            std::string::npos)
      << output;
  // The first broker's files are untouched and it still serves.
  EXPECT_EQ(ReadFile(dir + "/data/admin-credentials.json"), creds_before);
  EXPECT_EQ(ReadFile(dir + "/data/tls/broker-cert.pem"), cert_before);
  first.CreateStream("default", "still", /*durable=*/true);
  PublishRecords(first, "still", 3, 10);
  // The lock dies with its holder, even a killed one: the next start works.
  EXPECT_EQ(first.Stop(SIGKILL), 128 + SIGKILL);
  first.Start();
}

// Polls the broker's /metrics until `line` appears (a deadline, not a sleep, decides failure).
bool WaitForMetric(Broker& broker, const std::string& line,
                   std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (broker.Metrics().find(line) != std::string::npos) return true;
  }
  return false;
}

int HttpStatus(Broker& broker, const std::string& path) {
  httplib::Client client(broker.http().host, broker.http().port);
  auto r = client.Get(path);
  return r ? r->status : 0;
}

void WriteFaults(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  fs::rename(tmp, path);
}

// ---- Item 7: SIGTERM answers every admitted request before closing ----

TEST(Hardening, SigtermAnswersEveryAdmittedPublishWithItsOffsetBeforeClosing) {
  std::string dir = MakeTempDir("felix-drain");
  std::string faults = dir + "/faults";
  Broker broker(dir + "/data", {{"FELIX_STORAGE_FAULT_FILE", faults}});
  broker.CreateStream("default", "d", /*durable=*/true);
  auto client = broker.Connect();
  std::string token = broker.AllToken();
  auto publisher = Authed(*client, token);
  auto late = Authed(*client, token);
  // Open the shard first (opening syncs too), then a disk whose fsyncs hang keeps all 64
  // publishes in flight when the signal comes.
  publisher->Send(BinaryPublish(100, "d", {"p0"}));
  ASSERT_EQ(ReadAck(*publisher).offset, 0u);
  WriteFaults(faults, "hold_syncs=1\n");
  ASSERT_TRUE(broker.process().WaitForLine("faults write_errno=0 hold_syncs=1"));
  constexpr uint64_t kPublishes = 64;
  for (uint64_t i = 1; i <= kPublishes; ++i) {
    publisher->Send(BinaryPublish(i, "d", {"p" + std::to_string(i)}));
  }
  ASSERT_TRUE(WaitForMetric(broker, "felix_tenant_published_messages_total 65"));
  ASSERT_EQ(kill(broker.process().pid(), SIGTERM), 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (HttpStatus(broker, "/ready") != 503 && std::chrono::steady_clock::now() < deadline) {
  }
  // Admission has stopped: a new publish is refused as not written (retry class `retry`).
  late->Send(BinaryPublish(1000, "d", {"late"}));
  auto refused = ReadAck(*late);
  EXPECT_EQ(refused.status, flx1::BinaryPublishAck::Status::kError);
  ASSERT_TRUE(refused.code);
  EXPECT_EQ(refused.code->code, static_cast<uint16_t>(flx1::ProtocolErrorCode::kDraining));
  fs::remove(faults);  // the disk comes back: the held appends complete
  // Everything admitted before the signal is answered, with its offset.
  for (uint64_t i = 1; i <= kPublishes; ++i) {
    auto ack = ReadAck(*publisher);
    ASSERT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk) << i;
    EXPECT_EQ(ack.request_id, i);
    EXPECT_EQ(ack.offset, i);
  }
  EXPECT_EQ(broker.process().Wait(), 0);
  EXPECT_NE(broker.process().stderr_text().find("drain answered every admitted request"),
            std::string::npos)
      << broker.process().stderr_text();

  // Exactly the acknowledged records are in the log: none lost, the refused one not written.
  broker.Start();
  auto reader = broker.Connect();
  auto control = Authed(*reader, broker.AllToken());
  control->SendMessage(SubscribeEarliest("d"));
  auto events = reader->AcceptEventStream();
  ASSERT_TRUE(events);
  ASSERT_TRUE(events->Read<flx1::EventStreamHello>());
  auto subscribed = control->Read<flx1::Subscribed>();
  ASSERT_TRUE(subscribed);
  EXPECT_EQ(subscribed->live_offset, kPublishes + 1);
  auto got = ReadEvents(*events, kPublishes + 1);
  ASSERT_EQ(got.size(), kPublishes + 1);
  for (uint64_t i = 0; i <= kPublishes; ++i) EXPECT_EQ(got[i].second, "p" + std::to_string(i));
}

// ---- Item 9: the credential file is not rewritten when unchanged (restart on a full disk) ----

TEST(Hardening, RestartDoesNotRewriteAnUnchangedCredentialFile) {
  std::string dir = MakeTempDir("felix-creds");
  Broker broker(dir + "/data");
  std::string path = dir + "/data/admin-credentials.json";
  // Same addresses on the restart, so the file's content is the same.
  broker.SetEnv("FELIX_QUIC_BIND", broker.quic().ToString());
  broker.SetEnv("FELIX_BROKER_METRICS_BIND", broker.http().ToString());
  ASSERT_EQ(broker.Stop(), 0);
  struct stat before {};
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  std::string text_before = ReadFile(path);
  broker.Start();
  struct stat after {};
  ASSERT_EQ(stat(path.c_str(), &after), 0);
  EXPECT_EQ(ReadFile(path), text_before);
  EXPECT_EQ(after.st_ino, before.st_ino);  // not replaced
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

Json Health(Broker& broker, int* status) {
  httplib::Client client(broker.http().host, broker.http().port);
  auto r = client.Get("/health");
  *status = r ? r->status : 0;
  return r ? Json::parse(r->body, nullptr, false) : Json();
}

// ---- Item 8: a full disk is visible in the log, on /health and in the metrics ----

TEST(Hardening, FullDiskIsLoggedOnceListedOnHealthAndClearsWhenWritesSucceed) {
  std::string dir = MakeTempDir("felix-full");
  std::string faults = dir + "/faults";
  Broker broker(dir + "/data", {{"FELIX_STORAGE_FAULT_FILE", faults}});
  broker.CreateStream("default", "f", /*durable=*/true);
  auto client = broker.Connect();
  auto publisher = Authed(*client, broker.AllToken());
  publisher->Send(BinaryPublish(1, "f", {"before"}));
  ASSERT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk);
  int status = 0;
  EXPECT_EQ(Health(broker, &status)["status"], "ok");
  EXPECT_EQ(status, 200);

  WriteFaults(faults, "write_errno=28\n");  // ENOSPC on every data write
  ASSERT_TRUE(broker.process().WaitForLine("faults write_errno=28 hold_syncs=0"));
  for (uint64_t i = 0; i < 20; ++i) {
    publisher->Send(BinaryPublish(10 + i, "f", {"refused"}));
    EXPECT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kError);
  }
  Json health = Health(broker, &status);
  EXPECT_EQ(status, 503);
  ASSERT_EQ(health["problems"].size(), 1u) << health.dump();
  EXPECT_EQ(health["problems"][0]["kind"], "storage_write");
  EXPECT_NE(health["problems"][0]["detail"].get<std::string>().find("No space left on device"),
            std::string::npos);
  std::string metrics = broker.Metrics();
  EXPECT_NE(metrics.find("felix_health_problems{kind=\"storage_write\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("felix_storage_full_total{log=\"stream\"} 20"), std::string::npos);
  // Twenty failures, one error line (rate-limited).
  EXPECT_EQ(Count(broker.process().stderr_text(), "storage write failed"), 1u);

  fs::remove(faults);  // space again
  ASSERT_TRUE(broker.process().WaitForLine("faults write_errno=0 hold_syncs=0"));
  publisher->Send(BinaryPublish(99, "f", {"after"}));
  auto ack = ReadAck(*publisher);
  EXPECT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk);
  EXPECT_EQ(ack.offset, 1u);  // the refused writes consumed no offsets
  EXPECT_EQ(Health(broker, &status)["status"], "ok");
  EXPECT_EQ(status, 200);
  EXPECT_NE(broker.process().stderr_text().find("storage writes succeed again"), std::string::npos);
}

// ---- Item 6: a shard whose log is refused at open is visible and answers `retry` ----
// semantics.md §2.1 refuses the start on interior corruption; this broker opens shards on
// first use instead (a start never waits on every log), so the refusal happens then and is
// made visible: error log naming file and position, /health, a gauge, `shard_unavailable`.

TEST(Hardening, ShardRefusedAtOpenIsLoggedListedAndAnswersRetry) {
  std::string dir = MakeTempDir("felix-refused");
  Broker broker(dir + "/data");
  broker.CreateStream("default", "r", /*durable=*/true);
  PublishRecords(broker, "r", 50, 90);
  ASSERT_EQ(broker.Stop(), 0);
  auto segments = StreamSegments(dir + "/data", "r");
  ASSERT_EQ(segments.size(), 1u);
  FlipByte(segments[0], 32 + 10 * 130 + 40 + 5);  // record 10 of 50: interior damage
  broker.Start();

  auto client = broker.Connect();
  auto publisher = Authed(*client, broker.AllToken());
  for (uint64_t i = 1; i <= 2; ++i) {
    publisher->Send(BinaryPublish(i, "r", {"x"}));
    auto ack = ReadAck(*publisher);
    ASSERT_EQ(ack.status, flx1::BinaryPublishAck::Status::kError);
    ASSERT_TRUE(ack.code);
    EXPECT_EQ(ack.code->code, static_cast<uint16_t>(flx1::ProtocolErrorCode::kShardUnavailable));
    EXPECT_EQ(ack.code->retry, static_cast<uint8_t>(flx1::RetryClass::kRetry));  // not written
  }
  auto control = Authed(*client, broker.AllToken());
  control->SendMessage(SubscribeEarliest("r"));
  auto refused = control->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, "shard_unavailable");
  EXPECT_EQ(refused->retry, "retry");
  EXPECT_NE(refused->message.find(segments[0].filename().string()), std::string::npos)
      << refused->message;

  int status = 0;
  Json health = Health(broker, &status);
  EXPECT_EQ(status, 503);
  ASSERT_EQ(health["problems"].size(), 1u) << health.dump();
  EXPECT_EQ(health["problems"][0]["kind"], "shard_open");
  EXPECT_NE(health["problems"][0]["detail"].get<std::string>().find("position="),
            std::string::npos);
  EXPECT_NE(broker.Metrics().find("felix_health_problems{kind=\"shard_open\"} 1"),
            std::string::npos);
  std::string log = broker.process().stderr_text();
  EXPECT_EQ(Count(log, "shard log refused at open"), 1u) << log;  // once, not per request
  EXPECT_NE(log.find(segments[0].filename().string()), std::string::npos);
}

// ---- Item 4: group answers are bounded by encoded size; undeliverable records are refused ----

// One group_poll on its own stream; returns the answer's frame size and its records.
std::pair<size_t, std::vector<flx1::GroupRecord>> GroupPoll(Flx1TestClient& client,
                                                            const std::string& token,
                                                            const std::string& stream) {
  auto s = Authed(client, token);
  flx1::GroupPoll poll;
  poll.tenant_id = "default";
  poll.namespace_ = "default";
  poll.stream = stream;
  poll.group = "g";
  poll.max_records = 10;
  poll.request_id = 1;
  s->SendMessage(poll);
  auto bytes = s->ReadFrameBytes();
  EXPECT_TRUE(bytes);
  if (!bytes) return {0, {}};
  auto frame = flx1::DecodeFrame(*bytes, 64u << 20);
  EXPECT_TRUE(frame);
  auto* message = frame ? std::get_if<flx1::Message>(&*frame) : nullptr;
  auto* records = message ? std::get_if<flx1::GroupRecords>(message) : nullptr;
  EXPECT_NE(records, nullptr) << std::string(bytes->begin() + 12, bytes->end()).substr(0, 300);
  return {bytes->size() - flx1::kHeaderSize,
          records ? records->records : std::vector<flx1::GroupRecord>{}};
}

TEST(Hardening, GroupPollAnswersFitTheFrameLimitAndUndeliverableRecordsAreRefused) {
  constexpr size_t kMaxFrame = 1u << 20;
  std::string dir = MakeTempDir("felix-bigrec");
  Broker broker(dir + "/data", {{"FELIX_MAX_FRAME_BYTES", std::to_string(kMaxFrame)}});
  broker.CreateStream("default", "big", /*durable=*/true);
  const size_t limit = MaxGroupRecordBytes(kMaxFrame);
  auto client = broker.Connect();
  std::string token = broker.AllToken();
  auto publisher = Authed(*client, token);
  // Three records whose payloads fit one frame raw (900 KB) but not base64-encoded (1.2 MB).
  publisher->Send(BinaryPublish(1, "big", {std::string(300000, 'a')}));
  publisher->Send(BinaryPublish(2, "big", {std::string(300000, 'b')}));
  publisher->Send(BinaryPublish(3, "big", {std::string(300000, 'c')}));
  // At the limit: accepted. One byte more: refused, it could never be consumed by a group.
  publisher->Send(BinaryPublish(4, "big", {std::string(limit, 'd')}));
  publisher->Send(BinaryPublish(5, "big", {std::string(limit + 1, 'e')}));
  // The refusal is answered at once, the others after their write: match by request id.
  std::map<uint64_t, flx1::BinaryPublishAck> acks;
  for (int i = 0; i < 5; ++i) {
    auto ack = ReadAck(*publisher);
    acks[ack.request_id] = ack;
  }
  ASSERT_EQ(acks.size(), 5u);
  for (uint64_t i = 1; i <= 4; ++i) {
    EXPECT_EQ(acks[i].status, flx1::BinaryPublishAck::Status::kOk) << i << ": " << acks[i].message;
  }
  const flx1::BinaryPublishAck& refused = acks[5];
  EXPECT_EQ(refused.status, flx1::BinaryPublishAck::Status::kError);
  ASSERT_TRUE(refused.code);
  EXPECT_EQ(refused.code->code, static_cast<uint16_t>(flx1::ProtocolErrorCode::kInvalidRequest));

  // Every poll answer fits the frame limit; together they deliver all four records.
  std::vector<uint64_t> offsets;
  for (int poll = 0; poll < 4 && offsets.size() < 4; ++poll) {
    auto [size, records] = GroupPoll(*client, token, "big");
    EXPECT_LE(size, kMaxFrame);
    EXPECT_FALSE(records.empty());
    for (const auto& r : records) offsets.push_back(r.offset);
  }
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 1, 2, 3}));
}

// ---- Item 10: connections per source address are limited at admission ----

TEST(Hardening, ConnectionsBeyondThePerIpLimitAreRefusedAndCounted) {
  std::string dir = MakeTempDir("felix-perip");
  Broker broker(dir + "/data", {{"FELIX_MAX_CONNECTIONS_PER_IP", "3"}});
  std::string token = broker.AllToken();
  std::vector<std::unique_ptr<Flx1TestClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(broker.Connect());
    ASSERT_TRUE(clients.back());
    Authed(*clients.back(), token);
  }
  // The fourth (here: the CLI's) is closed as soon as its handshake completes.
  auto [code, output] =
      RunProgram(BuiltProgram("src/cli/felix"),
                 {"sub", "any", "--credentials", broker.data_dir() + "/admin-credentials.json"});
  EXPECT_NE(code, 0);
  EXPECT_NE(output.find("FELIX_MAX_CONNECTIONS_PER_IP reached"), std::string::npos) << output;
  EXPECT_TRUE(
      WaitForMetric(broker, "felix_quic_connections_refused_total{reason=\"per_ip_limit\"} 1"))
      << broker.Metrics();
  // A closed connection frees its slot.
  clients.pop_back();
  ASSERT_TRUE(WaitForMetric(broker, "felix_sub_active_connections 2")) << broker.Metrics();
  auto again = broker.Connect();
  ASSERT_TRUE(again);
  Authed(*again, token);
}

// ---- Item 11: record count is charged to the in-flight budget ----

TEST(Hardening, ManyEmptyRecordsAreChargedPerRecordAgainstTheInFlightBudget) {
  std::string dir = MakeTempDir("felix-empties");
  Broker broker(dir + "/data");
  broker.CreateStream("default", "e", /*durable=*/false);
  auto client = broker.Connect();
  auto publisher = Authed(*client, broker.AllToken());
  // 300,000 empty records: a 1.2 MB frame, but ~19 MB in flight (64 bytes a record) — more
  // than a stream's 16 MiB budget, so it can never be admitted; it used to cost nothing.
  publisher->Send(BinaryPublish(1, "e", std::vector<std::string>(300000)));
  auto refused = ReadAck(*publisher);
  EXPECT_EQ(refused.status, flx1::BinaryPublishAck::Status::kError);
  ASSERT_TRUE(refused.code);
  EXPECT_EQ(refused.code->code, static_cast<uint16_t>(flx1::ProtocolErrorCode::kLimitExceeded));
  // 100,000 (6.4 MB charged) fit.
  publisher->Send(BinaryPublish(2, "e", std::vector<std::string>(100000)));
  EXPECT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk);
  // After the burst (over 1/16 of the broker-wide budget) the broker gives freed heap back to
  // the OS once nothing is in flight any more.
  EXPECT_TRUE(WaitForMetric(broker, "felix_memory_trims_total 1")) << broker.Metrics();
}

// ---- Item 5: delete means delete, for streams and caches ----

TEST(Hardening, DeletedStreamEndsItsReadersLosesItsDataAndComesBackEmpty) {
  std::string dir = MakeTempDir("felix-delete");
  Broker broker(dir + "/data");
  broker.CreateStream("default", "gone", /*durable=*/true);
  PublishRecords(broker, "gone", 5, 20);
  auto client = broker.Connect();
  std::string token = broker.AllToken();
  auto control = Authed(*client, token);
  control->SendMessage(SubscribeEarliest("gone"));
  auto events = client->AcceptEventStream();
  ASSERT_TRUE(events);
  ASSERT_TRUE(events->Read<flx1::EventStreamHello>());
  ASSERT_EQ(ReadEvents(*events, 5).size(), 5u);
  // A group poll waiting for records when the stream goes.
  auto group = Authed(*client, token);
  flx1::GroupPoll poll;
  poll.tenant_id = "default";
  poll.namespace_ = "default";
  poll.stream = "gone";
  poll.group = "g";
  poll.max_records = 10;
  poll.request_id = 1;
  group->SendMessage(poll);  // takes the 5 records
  ASSERT_TRUE(group->Read<flx1::GroupRecords>());
  auto waiting = Authed(*client, token);
  poll.wait_ms = 20000;
  poll.request_id = 2;
  waiting->SendMessage(poll);  // nothing left: it waits
  ASSERT_TRUE(WaitForMetric(broker, "felix_group_polls_waited_total 1"));

  ASSERT_EQ(broker.Admin("DELETE", "/v1/tenants/default/namespaces/default/streams/gone").first,
            204);
  // The live subscription ends with an error saying why; the waiting poll is answered too.
  auto ended = events->Read<flx1::Error>();
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->code, "not_found");
  EXPECT_NE(ended->message.find("was deleted"), std::string::npos) << ended->message;
  EXPECT_TRUE(events->WaitEnded());
  auto answered = waiting->Read<flx1::Error>(std::chrono::seconds(5));
  ASSERT_TRUE(answered);
  EXPECT_NE(answered->message.find("was deleted"), std::string::npos) << answered->message;
  EXPECT_FALSE(fs::exists(dir + "/data/shards/default/default/gone"));

  // Created again under the same name: empty, nothing of the old records.
  broker.CreateStream("default", "gone", /*durable=*/true);
  auto again = Authed(*client, token);
  again->SendMessage(SubscribeEarliest("gone"));
  auto new_events = client->AcceptEventStream();
  ASSERT_TRUE(new_events);
  ASSERT_TRUE(new_events->Read<flx1::EventStreamHello>());
  auto subscribed = again->Read<flx1::Subscribed>();
  ASSERT_TRUE(subscribed);
  EXPECT_EQ(subscribed->live_offset, 0u);
  auto publisher = Authed(*client, token);
  publisher->Send(BinaryPublish(1, "gone", {"fresh"}));
  EXPECT_EQ(ReadAck(*publisher).offset, 0u);
  auto fresh = ReadEvents(*new_events, 1);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0], (std::pair<uint64_t, std::string>{0, "fresh"}));
}

TEST(Hardening, DeletedCacheComesBackEmpty) {
  std::string dir = MakeTempDir("felix-delete-cache");
  Broker broker(dir + "/data");
  auto create = [&] {
    auto [status, body] = broker.Admin("POST", "/v1/tenants/default/namespaces/default/caches",
                                       Json{{"cache", "kv"}, {"shards", 1}, {"durable", true}});
    ASSERT_EQ(status, 201) << body.dump();
  };
  create();
  std::string token =
      broker.Token("default", {"cache.read:cache:default/*/*", "cache.write:cache:default/*/*"});
  auto client = broker.Connect();
  auto cache = Authed(*client, token);
  flx1::CachePut put;
  put.tenant_id = "default";
  put.namespace_ = "default";
  put.cache = "kv";
  put.key = "secret";
  put.value = {'s', '3'};
  put.request_id = 1;
  cache->SendMessage(put);
  ASSERT_TRUE(cache->Read<flx1::CacheOk>());
  ASSERT_EQ(broker.Admin("DELETE", "/v1/tenants/default/namespaces/default/caches/kv").first, 204);
  EXPECT_FALSE(fs::exists(dir + "/data/shards/_caches/default/default/kv"));
  create();
  flx1::CacheGet get;
  get.tenant_id = "default";
  get.namespace_ = "default";
  get.cache = "kv";
  get.key = "secret";
  get.request_id = 2;
  auto reader = Authed(*client, token);
  reader->SendMessage(get);
  auto value = reader->Read<flx1::CacheValue>();
  ASSERT_TRUE(value);
  EXPECT_FALSE(value->value.has_value());  // a miss: the old value is gone
}

// ---- Item 12: a torn tail cut at recovery is logged, not only counted ----

TEST(Hardening, TornTailCutAtRecoveryIsLogged) {
  std::string dir = MakeTempDir("felix-torn");
  // Without preallocation the segment ends at its last record, so bytes appended to the file
  // are exactly what a crash mid-append leaves (with it they would land after the zeros).
  Broker broker(dir + "/data", {{"FELIX_DURABLE_PREALLOCATE_BYTES", "0"}});
  broker.CreateStream("default", "t", /*durable=*/true);
  PublishRecords(broker, "t", 5, 30);
  ASSERT_EQ(broker.Stop(SIGKILL), 128 + SIGKILL);
  auto segments = StreamSegments(dir + "/data", "t");
  ASSERT_FALSE(segments.empty());
  {
    std::ofstream tail(segments.back(), std::ios::app | std::ios::binary);
    tail << std::string(23, '\xab');  // half a record header: a crash mid-append
  }
  broker.Start();
  PublishRecords(broker, "t", 1, 30);  // opens the shard: recovery runs
  std::string log = broker.process().stderr_text();
  EXPECT_NE(log.find("log recovery cut a torn tail"), std::string::npos) << log;
  EXPECT_NE(log.find("truncated_bytes=23"), std::string::npos) << log;
}

// With preallocation (the default) a SIGKILL leaves zeros after the last record: they are the
// end of the log, not a torn tail, and the next publish takes the next offset.
TEST(Hardening, PreallocatedZerosLeftByAKillAreTheEndNotATornTail) {
  std::string dir = MakeTempDir("felix-prealloc");
  Broker broker(dir + "/data");
  broker.CreateStream("default", "z", /*durable=*/true, 1, "on_commit");
  PublishRecords(broker, "z", 30, 100);
  auto segments = StreamSegments(dir + "/data", "z");
  ASSERT_FALSE(segments.empty());
  const uint64_t records_end = 32 + 30 * (40 + 100);  // segment header + 30 records
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fs::file_size(segments.back()) <= records_end &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling with a deadline
  }
  ASSERT_GT(fs::file_size(segments.back()), records_end) << "no zeros were written ahead";
  ASSERT_EQ(broker.Stop(SIGKILL), 128 + SIGKILL);
  broker.Start();
  auto client = broker.Connect();
  auto publisher = Authed(*client, broker.AllToken());
  publisher->Send(BinaryPublish(1, "z", {std::string(100, 'y')}));
  EXPECT_EQ(ReadAck(*publisher).offset, 30u);
  std::string log = broker.process().stderr_text();
  EXPECT_EQ(log.find("torn tail"), std::string::npos) << log;
}

// ---- Item 2, CLI: `felix sub` that falls behind exits 3 naming the offset to resume from ----

TEST(Hardening, FelixSubThatFallsBehindExitsNamingTheResumeOffset) {
  std::string dir = MakeTempDir("felix-sub-lag");
  // A one-batch broker queue: the overflow comes once the client's own queue (4096 events)
  // and the QUIC windows are full.
  Broker broker(dir + "/data", {{"FELIX_SUBSCRIBER_QUEUE_CAPACITY", "1"}});
  broker.CreateStream("default", "l", /*durable=*/true, 1, "none");
  // The CLI's stdout is a pipe nobody reads until Wait(): once it is full the CLI stops, its
  // client stops reading, QUIC flow control stops the broker, the broker's queue overflows.
  ChildProcess sub(
      BuiltProgram("src/cli/felix"),
      {"sub", "l", "--from", "earliest", "--credentials", dir + "/data/admin-credentials.json"});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sub.stderr_text().find("subscribed to") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_NE(sub.stderr_text().find("subscribed to"), std::string::npos) << sub.stderr_text();
  auto client = broker.Connect();
  auto publisher = Authed(*client, broker.AllToken());
  constexpr int kBatches = 1500;
  constexpr int kRecords = kBatches * 10;  // 15 MB in all
  const std::vector<std::string> batch(10, std::string(1024, 'q'));
  for (int i = 0; i < kBatches; ++i) publisher->Send(BinaryPublish(i, "l", batch));
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk) << i;
  }
  ASSERT_TRUE(WaitForMetric(broker, "felix_sub_lagged_total 1"));
  EXPECT_EQ(sub.Wait(), 3);  // reading its output lets it finish
  std::string err = sub.stderr_text();
  size_t at = err.find("resume with --from ");
  ASSERT_NE(at, std::string::npos) << err;
  uint64_t resume = std::stoull(err.substr(at + 19));
  // It printed every offset below resume_from, in order, and nothing else.
  std::istringstream out(sub.stdout_text());
  std::string line;
  uint64_t expected = 0;
  while (std::getline(out, line)) {
    ASSERT_EQ(std::stoull(line.substr(0, line.find('\t'))), expected);
    ++expected;
  }
  EXPECT_EQ(expected, resume);
  EXPECT_LT(resume, static_cast<uint64_t>(kRecords));
}

}  // namespace
}  // namespace felix::broker
