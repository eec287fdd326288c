// EtcdCatalog against a real etcd process: two catalogs (two brokers) on two gRPC clients see
// each other's writes; after etcd is SIGKILLed and restarted on the same data they follow again;
// changes made while they were cut off, with the history they would need compacted away, reach
// them through a re-snapshot and are announced to their listeners.
#include <gtest/gtest.h>

#include <thread>

#include "cluster/etcd_catalog.h"
#include "cluster/etcd_catalog_recorder.h"
#include "etcd/grpc_etcd_client.h"
#include "support/etcd_process.h"

namespace felix::cluster {
namespace {

using namespace std::chrono_literals;
using felix::testing::EtcdProcess;
using testing::ChangeRecorder;

std::unique_ptr<etcd::GrpcEtcdClient> Connect(const std::string& endpoint) {
  etcd::GrpcEtcdOptions options;
  options.call_timeout = 1000ms;
  options.reconnect_max = 200ms;
  auto client = etcd::GrpcEtcdClient::Create(endpoint, options);
  if (!client) throw std::runtime_error(client.error().ToString());
  return std::move(*client);
}

ClusterKeys Keys() {
  auto k = ClusterKeys::Create("e2e");
  if (!k) throw std::runtime_error(k.error().ToString());
  return *k;
}

catalog::Stream MakeStream(const std::string& name) {
  catalog::Stream s;
  s.tenant_id = "default";
  s.namespace_name = "default";
  s.name = name;
  s.shards = 6;
  return s;
}

// Retries a create until etcd answers (right after a restart the channel reconnects). A retry
// after an indeterminate failure may find its own earlier write: kAlreadyExists counts.
template <typename Op>
bool CreateEventually(Op op, std::chrono::milliseconds timeout = 15s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto r = op();
    if (r || r.error().code == ErrorCode::kAlreadyExists) return true;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << r.error().ToString();
      return false;
    }
    std::this_thread::sleep_for(50ms);  // pacing between retries, not synchronisation
  }
}

struct Broker {
  std::unique_ptr<etcd::GrpcEtcdClient> client;
  std::unique_ptr<EtcdCatalog> catalog;
  ChangeRecorder changes;
};

std::unique_ptr<Broker> StartBroker(const std::string& endpoint) {
  auto b = std::make_unique<Broker>();
  b->client = Connect(endpoint);
  auto c = EtcdCatalog::Create(*b->client, Keys());
  if (!c) throw std::runtime_error(c.error().ToString());
  b->catalog = std::move(*c);
  b->catalog->AddListener(b->changes.Listener());
  b->catalog->Start();
  return b;
}

class EtcdCatalogE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start()) << etcd_.error();
    a_ = StartBroker(etcd_.endpoint());
    b_ = StartBroker(etcd_.endpoint());
    ASSERT_TRUE(a_->catalog->WaitUntilSynced(10s));
    ASSERT_TRUE(b_->catalog->WaitUntilSynced(10s));
    // Both brokers run EnsureDefaults at start, at once.
    Result<void> ra, rb;
    std::thread ta([&] { ra = a_->catalog->EnsureDefaults(); });
    std::thread tb([&] { rb = b_->catalog->EnsureDefaults(); });
    ta.join();
    tb.join();
    ASSERT_TRUE(ra) << ra.error().ToString();
    ASSERT_TRUE(rb) << rb.error().ToString();
  }
  void TearDown() override {
    b_.reset();
    a_.reset();
  }

  EtcdProcess etcd_;
  std::unique_ptr<Broker> a_, b_;
};

TEST_F(EtcdCatalogE2E, TwoBrokersSeeEachOthersWritesAndResyncAfterAnEtcdRestart) {
  ASSERT_TRUE(a_->catalog->CreateStream(MakeStream("orders")));
  ASSERT_TRUE(b_->changes.WaitFor("+stream default/default/orders"));
  EXPECT_EQ(b_->catalog->CreateStream(MakeStream("orders")).error().code,
            ErrorCode::kAlreadyExists);
  ASSERT_TRUE(b_->catalog->DeleteStream("default", "default", "orders"));
  ASSERT_TRUE(a_->changes.WaitFor("-stream default/default/orders"));
  EXPECT_FALSE(a_->catalog->GetStream("default", "default", "orders"));

  etcd_.Kill();
  // Proves the fault took effect: a write now fails, and says its outcome is unknown or that
  // etcd is unreachable.
  auto failed = a_->catalog->CreateStream(MakeStream("during"));
  ASSERT_FALSE(failed);
  EXPECT_TRUE(failed.error().code == ErrorCode::kUnavailable ||
              failed.error().code == ErrorCode::kTimeout)
      << failed.error().ToString();
  ASSERT_TRUE(etcd_.Restart()) << etcd_.error();

  ASSERT_TRUE(CreateEventually([&] { return b_->catalog->CreateStream(MakeStream("after")); }));
  ASSERT_TRUE(a_->changes.WaitFor("+stream default/default/after", 15s));
  ASSERT_TRUE(a_->catalog->WaitForRevision(b_->catalog->revision(), 10s));
  EXPECT_TRUE(a_->catalog->GetStream("default", "default", "after"));
  EXPECT_EQ(a_->catalog->Snapshot()->AllStreams(), b_->catalog->Snapshot()->AllStreams());
}

TEST_F(EtcdCatalogE2E, ChangesMissedWhileCutOffArriveThroughAReSnapshot) {
  ASSERT_TRUE(a_->catalog->CreateStream(MakeStream("old")));
  ASSERT_TRUE(b_->changes.WaitFor("+stream default/default/old"));
  int64_t revision_before = b_->catalog->revision();

  // Change etcd where the brokers cannot see it, and compact the history they would need.
  etcd_.Kill();
  ASSERT_TRUE(etcd_.StartOnOtherPort()) << etcd_.error();
  {
    auto side = StartBroker(etcd_.other_endpoint());
    ASSERT_TRUE(side->catalog->WaitUntilSynced(10s));
    ASSERT_TRUE(side->catalog->DeleteStream("default", "default", "old"));
    ASSERT_TRUE(side->catalog->CreateStream(MakeStream("new")));
    ASSERT_TRUE(side->client->Compact(side->catalog->revision()));
  }
  etcd_.Kill();
  ASSERT_TRUE(etcd_.Restart()) << etcd_.error();

  for (auto* broker : {a_.get(), b_.get()}) {
    ASSERT_TRUE(broker->changes.WaitFor("-stream default/default/old", 15s));
    ASSERT_TRUE(broker->changes.WaitFor("+stream default/default/new", 15s));
    EXPECT_FALSE(broker->catalog->GetStream("default", "default", "old"));
    EXPECT_TRUE(broker->catalog->GetStream("default", "default", "new"));
    // revision() follows once the listeners have run.
    EXPECT_TRUE(broker->catalog->WaitForRevision(revision_before + 1, 10s));
    // The tenant and its key survived; nothing else was announced as changed.
    EXPECT_TRUE(broker->catalog->SigningKeyFor("default"));
  }
  std::vector<std::string> lines = b_->changes.Lines();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "+tenant default"), 1) << lines.size();
}

}  // namespace
}  // namespace felix::cluster
