// OffsetTable<V>: a map from log offsets to V kept in one flat array (open addressing, linear
// probing), for the per-record state of a consumer group (consumer_group.h).
//
// Why not std::map: a group claims and settles every record it hands out, so its claims and
// attempt counts see an insert and an erase per record. As tree nodes that was an allocation, a
// free and two rebalances each — with the claim-deadline set, ~5 % of the loop thread on the
// acks-together drain (docs/performance.md change 71). Offsets are dense and mostly rising, so
// a multiplicative hash spreads them evenly and a lookup is one or two probes.
//
// Unordered: iteration (ForEach, EraseIf) visits entries in no particular order. Erase shifts
// later entries of the probe run back (no tombstones), so the table never degrades under a
// stream of inserts and erases. The array grows at 3/4 load and halves below 1/16 load down to
// 1024 slots, so a burst's memory is given back without resizing in every round of a steady
// load.
//
// Contracts: V default-constructible and movable. Pointers and references to values are
// invalidated by any Insert or Erase. Not thread-safe (owned like its ConsumerGroup).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/strong_types.h"

namespace felix::broker {

template <typename V>
class OffsetTable {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(Offset offset) const { return Find(offset) != nullptr; }

  V* Find(Offset offset) { return const_cast<V*>(std::as_const(*this).Find(offset)); }
  const V* Find(Offset offset) const {
    if (size_ == 0) return nullptr;
    for (size_t i = Home(offset);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (!slot.used) return nullptr;
      if (slot.key == offset) return &slot.value;
    }
  }

  // The value at `offset`, inserted as V{} when absent.
  V& FindOrInsert(Offset offset) {
    if (V* found = Find(offset)) return *found;
    if ((size_ + 1) * 4 > slots_.size() * 3) Resize(slots_.empty() ? kMinSlots : slots_.size() * 2);
    size_t i = Home(offset);
    while (slots_[i].used) i = (i + 1) & mask_;
    slots_[i].used = true;
    slots_[i].key = offset;
    slots_[i].value = V{};
    ++size_;
    return slots_[i].value;
  }

  // Sets the value at `offset` (inserted or replaced).
  void Insert(Offset offset, V value) { FindOrInsert(offset) = std::move(value); }

  // True if `offset` was present.
  bool Erase(Offset offset) {
    if (size_ == 0) return false;
    size_t hole = Home(offset);
    while (true) {
      if (!slots_[hole].used) return false;
      if (slots_[hole].key == offset) break;
      hole = (hole + 1) & mask_;
    }
    // Backward shift: an entry later in the run moves into the hole unless its home lies
    // cyclically in (hole, at] — then it would no longer be reachable from its home.
    for (size_t at = (hole + 1) & mask_; slots_[at].used; at = (at + 1) & mask_) {
      const size_t home = Home(slots_[at].key);
      const bool stays = hole <= at ? (hole < home && home <= at) : (hole < home || home <= at);
      if (stays) continue;
      slots_[hole].key = slots_[at].key;
      slots_[hole].value = std::move(slots_[at].value);
      hole = at;
    }
    slots_[hole].used = false;
    slots_[hole].value = V{};  // gives back what the value held (a string's buffer)
    --size_;
    if (slots_.size() > kMinShrinkSlots && size_ * 16 < slots_.size()) Resize(slots_.size() / 2);
    return true;
  }

  void clear() {
    slots_.clear();
    mask_ = 0;
    shift_ = 64;
    size_ = 0;
  }

  // f(Offset, const V&) for every entry, in no particular order; f must not modify the table.
  template <typename F>
  void ForEach(F&& f) const {
    for (const Slot& slot : slots_) {
      if (slot.used) f(slot.key, slot.value);
    }
  }

  // Erases every entry for which pred(Offset, const V&) holds.
  template <typename Pred>
  void EraseIf(Pred&& pred) {
    std::vector<Offset> doomed;
    ForEach([&](Offset key, const V& value) {
      if (pred(key, value)) doomed.push_back(key);
    });
    for (Offset key : doomed) Erase(key);
  }

 private:
  static constexpr size_t kMinSlots = 16;
  // Never shrunk below this: a group's claims empty and fill again with every round of polls
  // and acks, and a table that shrank as they drained would grow again on the next poll
  // (a resize per round; 0.6 % of the loop thread on the acks-together drain).
  static constexpr size_t kMinShrinkSlots = 1024;

  struct Slot {
    Offset key;
    bool used = false;
    V value{};
  };

  // Fibonacci hashing: consecutive offsets land far apart, whatever the table's size.
  size_t Home(Offset offset) const {
    return static_cast<size_t>((offset.value() * 0x9E3779B97F4A7C15ULL) >> shift_) & mask_;
  }

  void Resize(size_t slots) {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(slots));
    mask_ = slots - 1;
    shift_ = 64;
    for (size_t s = slots; s > 1; s >>= 1) --shift_;
    for (Slot& slot : old) {
      if (!slot.used) continue;
      size_t i = Home(slot.key);
      while (slots_[i].used) i = (i + 1) & mask_;
      slots_[i].used = true;
      slots_[i].key = slot.key;
      slots_[i].value = std::move(slot.value);
    }
  }

  std::vector<Slot> slots_;  // size 0 or a power of two
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace felix::broker
