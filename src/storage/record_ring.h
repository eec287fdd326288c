// RecordRing: a RingLog's records in order, oldest first, in one array used circularly. `Slot`
// is what a record is kept as (a RingLog keeps its payload in a PayloadArena, the slot only
// where it is).
//
// Why not std::deque: a deque allocates a block at the back every few records and frees one at
// the front as many records later, so a full ring under a steady append (the state of every busy
// in-memory stream) paid an allocation and a free per eight records in its mutex
// (docs/performance.md, change 56). Here a slot is reused once the record in it is popped.
//
// The array doubles when a push finds it full (the records move, in order) and shrinks only on
// Clear(): it holds sizeof(Slot) per record at the most the ring ever held at once, which
// RingOptions::max_records bounds. A popped slot keeps what the caller left in it.
//
// Not thread-safe: its RingLog's mutex guards it.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "storage/log_reader.h"

namespace felix::storage {

template <typename Slot = Record>
class RecordRing {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // i < size(): the i-th record from the oldest.
  const Slot& operator[](size_t i) const { return slots_[Index(i)]; }
  Slot& front() { return slots_[head_]; }

  // A slot after the newest record, now the newest; the caller sets every field (a reused slot
  // holds whatever its last record left there).
  Slot& PushBack() {
    if (size_ == slots_.size()) Grow();
    ++size_;
    return slots_[Index(size_ - 1)];
  }
  // Drops the oldest record (size() > 0); its slot is left as it is.
  void PopFront() {
    head_ = head_ + 1 == slots_.size() ? 0 : head_ + 1;
    --size_;
  }
  // Empty, and the array freed.
  void Clear() {
    std::vector<Slot>().swap(slots_);
    head_ = size_ = 0;
  }

 private:
  static constexpr size_t kFirstSlots = 16;

  size_t Index(size_t i) const {
    size_t at = head_ + i;
    return at >= slots_.size() ? at - slots_.size() : at;
  }
  void Grow() {
    std::vector<Slot> grown(slots_.empty() ? kFirstSlots : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) grown[i] = std::move(slots_[Index(i)]);
    slots_ = std::move(grown);
    head_ = 0;
  }

  std::vector<Slot> slots_;
  size_t head_ = 0;  // the oldest record's slot
  size_t size_ = 0;
};

}  // namespace felix::storage
