// The JSON records: round trips, and typed refusals of bad values.
#include "cluster/etcd_records.h"

#include <gtest/gtest.h>

namespace felix::cluster {
namespace {

TEST(EtcdRecords, NodeRecordRoundTrips) {
  NodeRecord r{"n1", 7, "10.0.0.1:5001", "10.0.0.1:4433", "z1", "0.1.0", {"flxi-v1"}};
  auto back = DecodeNodeRecord(EncodeNodeRecord(r));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(*back, r);
}

TEST(EtcdRecords, ControllerRecordRoundTrips) {
  ControllerRecord r{"n2", 3};
  auto back = DecodeControllerRecord(EncodeControllerRecord(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, r);
}

TEST(EtcdRecords, AssignmentRoundTripsWithAndWithoutMove) {
  Assignment a{5, "n1", {"n1", "n2", "n3"}, AssignmentState::kActive, std::nullopt};
  auto back = DecodeAssignment(EncodeAssignment(a));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(*back, a);
  Assignment m{6, "n1", {"n1", "n2"}, AssignmentState::kMoving, MovePlan{"n2", MoveStep::kFence}};
  auto back2 = DecodeAssignment(EncodeAssignment(m));
  ASSERT_TRUE(back2) << back2.error().ToString();
  EXPECT_EQ(*back2, m);
  Assignment u{7, "", {"n1"}, AssignmentState::kUnavailable, std::nullopt};
  auto back3 = DecodeAssignment(EncodeAssignment(u));
  ASSERT_TRUE(back3) << back3.error().ToString();
  EXPECT_EQ(*back3, u);
}

TEST(EtcdRecords, AJoiningReplicaRoundTripsAndMustBeAFollower) {
  Assignment a{5, "n1", {"n1", "n2", "n3", "n4"}, AssignmentState::kActive, std::nullopt, "n4"};
  auto back = DecodeAssignment(EncodeAssignment(a));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(*back, a);
  EXPECT_FALSE(ValidateAssignment(
      {5, "n1", {"n1", "n2"}, AssignmentState::kActive, std::nullopt, std::string("n9")}));
  EXPECT_FALSE(ValidateAssignment(
      {5, "n1", {"n1", "n2"}, AssignmentState::kActive, std::nullopt, std::string("n1")}));
  EXPECT_FALSE(DecodeAssignment(
      R"({"generation":5,"leader":"n1","replicas":["n1"],"state":"active","joining":7})"));
}

TEST(EtcdRecords, ReportRoundTrips) {
  Report r{4, "n1", {"n2"}, {{"n1", 100}, {"n2", 90}}, 90};
  auto back = DecodeReport(EncodeReport(r));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(*back, r);
}

TEST(EtcdRecords, AssignmentInvariantsAreChecked) {
  EXPECT_FALSE(ValidateAssignment({0, "n1", {"n1"}, AssignmentState::kActive, std::nullopt}));
  EXPECT_FALSE(ValidateAssignment({1, "n9", {"n1"}, AssignmentState::kActive, std::nullopt}));
  EXPECT_FALSE(ValidateAssignment({1, "n1", {"n1", "n1"}, AssignmentState::kActive, std::nullopt}));
  EXPECT_FALSE(ValidateAssignment({1, "", {"n1"}, AssignmentState::kActive, std::nullopt}));
  EXPECT_FALSE(ValidateAssignment({1, "n1", {"n1"}, AssignmentState::kMoving, std::nullopt}));
  EXPECT_FALSE(ValidateAssignment(
      {1, "n1", {"n1"}, AssignmentState::kActive, MovePlan{"n2", MoveStep::kStage}}));
  EXPECT_FALSE(ValidateAssignment({1, "n1", {"n1"}, AssignmentState::kUnavailable, std::nullopt}));
  auto r = ValidateAssignment({1, "n9", {"n1"}, AssignmentState::kActive, std::nullopt});
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

TEST(EtcdRecords, BadValuesAreTypedCorruption) {
  const char* bad_assignments[] = {
      "",
      "not json",
      "[]",
      R"({"leader":"n1","replicas":["n1"],"state":"active"})",
      R"({"generation":-1,"leader":"n1","replicas":["n1"],"state":"active"})",
      R"({"generation":1.5,"leader":"n1","replicas":["n1"],"state":"active"})",
      R"({"generation":1,"leader":7,"replicas":["n1"],"state":"active"})",
      R"({"generation":1,"leader":"n1","replicas":"n1","state":"active"})",
      R"({"generation":1,"leader":"n1","replicas":[1],"state":"active"})",
      R"({"generation":1,"leader":"n1","replicas":["n1"],"state":"sleeping"})",
      R"({"generation":1,"leader":"n1","replicas":["n1"],"state":"moving","move":{"target":"n2","step":"jump"}})",
      R"({"generation":1,"leader":"n1","replicas":["n1"],"state":"moving","move":"n2"})",
      R"({"generation":1,"leader":"n2","replicas":["n1"],"state":"active"})",
  };
  for (const char* text : bad_assignments) {
    auto r = DecodeAssignment(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code, ErrorCode::kCorruption) << text;
  }
  std::string huge = R"({"generation":1,"leader":"n1","replicas":[)";
  for (int i = 0; i < 300; ++i) huge += "\"r" + std::to_string(i) + "\",";
  huge += R"("n1"],"state":"active"})";
  EXPECT_EQ(DecodeAssignment(huge).error().code, ErrorCode::kCorruption);
  EXPECT_EQ(DecodeAssignment(std::string(70000, ' ')).error().code, ErrorCode::kCorruption);

  EXPECT_FALSE(DecodeNodeRecord(R"({"node_id":"n1","incarnation":1})"));  // no internal_addr
  EXPECT_FALSE(DecodeNodeRecord(R"({"node_id":"","incarnation":1,"internal_addr":"a:1"})"));
  EXPECT_FALSE(DecodeNodeRecord(R"({"node_id":"n1","incarnation":"1","internal_addr":"a:1"})"));
  EXPECT_FALSE(DecodeControllerRecord(R"({"node_id":"n1"})"));
  EXPECT_FALSE(DecodeReport(R"({"generation":1,"leader":"n1","caught_up":[],"commit":1})"));
  EXPECT_FALSE(DecodeReport(
      R"({"generation":1,"leader":"n1","caught_up":[],"durable":{"n1":-5},"commit":1})"));
}

}  // namespace
}  // namespace felix::cluster
