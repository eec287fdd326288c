// Helpers for the controller tests on FakeEtcd and on a real etcd: registering nodes, writing
// catalog streams/caches the way the etcd catalog does (catalog::ToJson(...).dump()), reading
// assignments back, and building a ControllerView from one range read.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "catalog/model.h"
#include "cluster/assignment_txn_contract.h"
#include "cluster/controller.h"
#include "cluster/controller_view.h"

namespace felix::cluster::testing {

inline std::chrono::steady_clock::time_point Deadline(int seconds = 10) {
  return std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
}

// Puts nodes/<id> under `lease`; returns the revision (0 on failure, reported).
inline int64_t RegisterNode(etcd::EtcdClient& etcd, const std::string& id, int64_t lease,
                            const std::string& zone = {}) {
  NodeRecord record{id, 1, id + ":7001", id + ":7000", zone, "test", {}};
  auto put = etcd.Put(TestKeys().Node(id), EncodeNodeRecord(record), lease);
  EXPECT_TRUE(put) << put.error().ToError().ToString();
  return put ? put->revision : 0;
}

// Puts a stream or cache (catalog::Stream / catalog::Cache of tenant t, namespace ns) at `key`
// the way the etcd catalog stores it; returns the revision.
template <typename Entity>
int64_t PutCatalogEntity(etcd::EtcdClient& etcd, const std::string& key, const std::string& name,
                         uint32_t shards, uint32_t rf) {
  Entity e{.tenant_id = "t", .namespace_name = "ns", .name = name};
  e.shards = shards;
  e.replication_factor = rf;
  auto put = etcd.Put(key, catalog::ToJson(e).dump());
  EXPECT_TRUE(put) << put.error().ToError().ToString();
  return put ? put->revision : 0;
}

inline int64_t CreateStream(etcd::EtcdClient& etcd, const std::string& name, uint32_t shards,
                            uint32_t rf) {
  return PutCatalogEntity<catalog::Stream>(etcd, TestKeys().CatalogStream("t", "ns", name), name,
                                           shards, rf);
}

inline int64_t CreateCache(etcd::EtcdClient& etcd, const std::string& name, uint32_t shards,
                           uint32_t rf) {
  return PutCatalogEntity<catalog::Cache>(etcd, TestKeys().CatalogCache("t", "ns", name), name,
                                          shards, rf);
}

// Every assignment of one stream/cache by shard number.
inline std::map<uint32_t, Assignment> AssignmentsOf(etcd::EtcdClient& etcd, ShardKind kind,
                                                    const std::string& name) {
  auto keys = TestKeys();
  std::string prefix = keys.AssignPrefix() + ShardKindName(kind) + "/t/ns/" + name + "/";
  std::map<uint32_t, Assignment> out;
  auto range = etcd.GetPrefix(prefix);
  EXPECT_TRUE(range) << range.error().ToError().ToString();
  if (!range) return out;
  for (const auto& kv : range->kvs) {
    auto shard = keys.ParseAssign(kv.key);
    auto value = DecodeAssignment(kv.value);
    EXPECT_TRUE(shard && value) << kv.key;
    if (shard && value) out[shard->shard] = *value;
  }
  return out;
}

inline std::map<uint32_t, Assignment> StreamAssignments(etcd::EtcdClient& etcd,
                                                        const std::string& name) {
  return AssignmentsOf(etcd, ShardKind::kStream, name);
}

// The view a controller's mirror would hold now.
inline ControllerView ReadView(etcd::EtcdClient& etcd) {
  ControllerView view(TestKeys());
  auto range = etcd.GetPrefix(TestKeys().prefix());
  EXPECT_TRUE(range) << range.error().ToError().ToString();
  if (!range) return view;
  for (const auto& kv : range->kvs) view.Put(kv);
  view.set_revision(range->revision);
  return view;
}

// Waits (bounded waits on each in turn) until one of the two is the controller.
inline Controller* WaitForEither(Controller& a, Controller& b,
                                 std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    auto slice = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    if (a.WaitForRole(true, slice)) return &a;
    if (b.is_controller()) return &b;
  }
  return nullptr;
}

}  // namespace felix::cluster::testing
