#include "broker/commit_gate.h"

namespace felix::broker {

CommitGate::CommitGate(Executor& executor, CommitGateOptions options, Release release)
    : executor_(executor),
      options_(options),
      release_(std::move(release)),
      self_(std::make_shared<CommitGate*>(this)) {}

CommitGate::~CommitGate() {
  if (timer_ != 0) executor_.Cancel(timer_);
}

void CommitGate::Hold(std::shared_ptr<PayloadBatch> batch, Offset first,
                      std::function<void(Result<Offset>)> done,
                      std::function<void(Result<Offset>)> late) {
  if (closed_) {
    if (options_.not_leading != nullptr) options_.not_leading->Increment();
    done(Fail(ErrorCode::kInternal, close_reason_));
    return;
  }
  held_.push_back(HeldBatch{std::move(batch), first, std::move(done), std::move(late),
                            Executor::Clock::now() + options_.timeout});
  ReleaseCovered();
  ArmTimer();
}

void CommitGate::Advance(Offset commit) {
  if (commit <= commit_) return;
  commit_ = commit;
  if (!closed_) ReleaseCovered();
}

void CommitGate::ReleaseCovered() {
  while (!held_.empty() && held_.front().end() <= commit_) {
    HeldBatch released = std::move(held_.front());
    held_.pop_front();
    if (answered_ > 0) --answered_;
    release_(released);
  }
}

void CommitGate::Close(const std::string& why) {
  if (closed_) return;
  closed_ = true;
  close_reason_ = "unacknowledged: " + why +
                  " before a majority of the replica set confirmed the batch; it is durable on "
                  "this broker and may or may not survive (outcome unknown)";
  std::deque<HeldBatch> held;
  held.swap(held_);
  for (size_t i = answered_; i < held.size(); ++i) {
    if (options_.not_leading != nullptr) options_.not_leading->Increment();
    held[i].done(Fail(ErrorCode::kInternal, close_reason_));
  }
  answered_ = 0;
  if (timer_ != 0) executor_.Cancel(timer_);
  timer_ = 0;
}

void CommitGate::ArmTimer() {
  if (timer_ != 0 || answered_ >= held_.size()) return;
  auto delay = held_[answered_].deadline - Executor::Clock::now();
  std::weak_ptr<CommitGate*> weak = self_;
  timer_ = executor_.PostAfter(std::max(delay, Executor::Clock::duration::zero()), [weak] {
    if (auto self = weak.lock()) (*self)->OnTimer();
  });
}

void CommitGate::OnTimer() {
  timer_ = 0;
  const auto now = Executor::Clock::now();
  while (answered_ < held_.size() && held_[answered_].deadline <= now) {
    HeldBatch& late = held_[answered_++];
    if (options_.timed_out != nullptr) options_.timed_out->Increment();
    auto done = std::move(late.done);
    late.done = std::move(late.late);
    done(Fail(ErrorCode::kTimeout,
              "quorum_timeout: offsets " + to_string(late.first) + ".." +
                  to_string(late.end() - 1) + " not confirmed by a majority of the replica " +
                  "set within " + std::to_string(options_.timeout.count()) +
                  " ms; durable on the leader, may still commit (outcome unknown)"));
  }
  ArmTimer();
}

}  // namespace felix::broker
