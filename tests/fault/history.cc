#include "fault/history.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace felix::fault {

using Json = nlohmann::json;

void AppendRead(std::vector<std::pair<uint64_t, std::string>>& read, uint64_t offset,
                uint64_t skipped_before, std::string value) {
  skipped_before = std::min(skipped_before, offset);
  for (uint64_t o = offset - skipped_before; o < offset; ++o) read.emplace_back(o, kNoEvent);
  read.emplace_back(offset, std::move(value));
}

Outcome RefusalOutcome(std::string_view retry_class) {
  if (retry_class == "retry" || retry_class == "retry_after" || retry_class == "redirect") {
    return Outcome::kFail;
  }
  return Outcome::kIndeterminate;
}

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kFail:
      return "fail";
    case Outcome::kIndeterminate:
      return "indeterminate";
  }
  return "indeterminate";
}

std::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kPublish:
      return "publish";
    case OpKind::kRead:
      return "read";
    case OpKind::kAdd:
      return "add";
    case OpKind::kPut:
      return "put";
    case OpKind::kGet:
      return "get";
    case OpKind::kDelete:
      return "delete";
    case OpKind::kPoll:
      return "poll";
    case OpKind::kAck:
      return "ack";
    case OpKind::kNack:
      return "nack";
  }
  return "publish";
}

std::vector<std::string> PublishedValues(const Op& op) {
  if (!op.batch.empty()) return op.batch;
  return {op.value};
}

namespace {

template <typename E>
std::optional<E> Parse(std::string_view name, std::string_view (*to_name)(E),
                       std::initializer_list<E> all) {
  for (E e : all) {
    if (to_name(e) == name) return e;
  }
  return std::nullopt;
}

Json ToJson(const Op& op) {
  Json j{{"id", op.id},
         {"client", op.client},
         {"kind", OpKindName(op.kind)},
         {"invoke_us", op.invoke_us},
         {"complete_us", op.complete_us},
         {"outcome", OutcomeName(op.outcome)},
         {"shard", op.shard},
         {"node", op.node}};
  if (!op.key.empty()) j["key"] = op.key;
  if (!op.value.empty() || op.found) j["value"] = op.value;
  if (op.offset) j["offset"] = *op.offset;
  if (op.kind == OpKind::kAdd) j["delta"] = op.delta;
  if (!op.batch.empty()) j["batch"] = op.batch;
  if (op.kind == OpKind::kRead || op.kind == OpKind::kPoll) {
    Json read = Json::array();
    for (const auto& [offset, value] : op.read) read.push_back(Json::array({offset, value}));
    j["read"] = std::move(read);
  }
  if (!op.error.empty()) j["error"] = op.error;
  return j;
}

Result<Op> FromJson(const Json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "not an object");
  Op op;
  try {
    op.id = j.at("id").get<uint64_t>();
    op.client = j.at("client").get<int>();
    auto kind =
        Parse<OpKind>(j.at("kind").get<std::string>(), OpKindName,
                      {OpKind::kPublish, OpKind::kRead, OpKind::kAdd, OpKind::kPut, OpKind::kGet,
                       OpKind::kDelete, OpKind::kPoll, OpKind::kAck, OpKind::kNack});
    auto outcome = Parse<Outcome>(j.at("outcome").get<std::string>(), OutcomeName,
                                  {Outcome::kOk, Outcome::kFail, Outcome::kIndeterminate});
    if (!kind || !outcome) return Fail(ErrorCode::kInvalidArgument, "unknown kind or outcome");
    op.kind = *kind;
    op.outcome = *outcome;
    op.invoke_us = j.at("invoke_us").get<int64_t>();
    op.complete_us = j.at("complete_us").get<int64_t>();
    op.shard = j.value("shard", 0u);
    op.node = j.value("node", 0);
    op.key = j.value("key", "");
    op.value = j.value("value", "");
    op.found = (op.kind == OpKind::kGet || op.kind == OpKind::kDelete) && j.contains("value");
    if (j.contains("offset")) op.offset = j.at("offset").get<uint64_t>();
    op.delta = j.value("delta", int64_t{0});
    if (j.contains("batch")) op.batch = j.at("batch").get<std::vector<std::string>>();
    if (j.contains("read")) {
      for (const auto& pair : j.at("read")) {
        op.read.emplace_back(pair.at(0).get<uint64_t>(), pair.at(1).get<std::string>());
      }
    }
    op.error = j.value("error", "");
  } catch (const Json::exception& e) {
    return Fail(ErrorCode::kInvalidArgument, e.what());
  }
  return op;
}

}  // namespace

History& History::operator=(const History& other) {
  if (this == &other) return *this;
  auto ops = other.ops();
  std::lock_guard lock(mu_);
  ops_ = std::move(ops);
  next_id_ = other.next_id_;
  return *this;
}

uint64_t History::Add(Op op) {
  std::lock_guard lock(mu_);
  if (op.id == 0) op.id = next_id_;
  next_id_ = std::max(next_id_, op.id + 1);
  ops_.push_back(std::move(op));
  return ops_.back().id;
}

std::vector<Op> History::ops() const {
  std::lock_guard lock(mu_);
  return ops_;
}

size_t History::size() const {
  std::lock_guard lock(mu_);
  return ops_.size();
}

std::string History::ToJsonLines() const {
  std::string out;
  for (const Op& op : ops()) {
    // Values read back from a broker are bytes: never throw on one that is not UTF-8.
    out += ToJson(op).dump(-1, ' ', false, Json::error_handler_t::replace);
    out += '\n';
  }
  return out;
}

Result<void> History::WriteFile(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  out << ToJsonLines();
  if (!out.flush()) return Fail(ErrorCode::kIo, "cannot write " + path);
  return Ok();
}

Result<History> History::FromJsonLines(std::string_view text) {
  History history;
  std::istringstream in{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return Fail(ErrorCode::kInvalidArgument, "line " + std::to_string(number) + ": not JSON");
    }
    auto op = FromJson(j);
    if (!op) {
      return Fail(ErrorCode::kInvalidArgument,
                  "line " + std::to_string(number) + ": " + op.error().message);
    }
    history.Add(std::move(*op));
  }
  return history;
}

Result<History> History::ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Fail(ErrorCode::kNotFound, "cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return FromJsonLines(buffer.str());
}

}  // namespace felix::fault
