#include "vgpu/alloc_table.h"

#include <sched.h>
#include <sys/mman.h>

#include <cstring>

namespace hami::vgpu {
namespace {
// Table locks this thread holds (0 or 1: no table operation takes a second table's lock). A
// signal handler that allocates while its thread is inside a table must not spin on a lock that
// thread will never release.
thread_local int t_table_depth = 0;
}  // namespace

AllocTable::~AllocTable() {
  if (slots_ != nullptr) munmap(slots_, capacity_ * sizeof(AllocEntry));
}

bool AllocTable::Init(std::size_t capacity, std::size_t max_capacity) {
  std::size_t cap = 16;
  while (cap < capacity) cap <<= 1;
  std::size_t max_cap = 16;
  while (max_cap < max_capacity && max_cap < kMaxCapacity) max_cap <<= 1;
  if (cap > max_cap) cap = max_cap;
  max_capacity_ = max_cap;
  void* mem = mmap(nullptr, cap * sizeof(AllocEntry), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return false;
  slots_ = static_cast<AllocEntry*>(mem);
  capacity_ = cap;
  size_ = 0;
  return true;
}

void AllocTable::Clear() {
  if (!LockTable()) return;
  if (slots_ != nullptr) std::memset(static_cast<void*>(slots_), 0, capacity_ * sizeof(AllocEntry));
  size_ = 0;
  UnlockTable();
}

bool AllocTable::LockTable() {
  if (t_table_depth > 0) return false;
  ++t_table_depth;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  while (lock_.test_and_set(std::memory_order_acquire)) sched_yield();
  return true;
}

void AllocTable::UnlockTable() {
  lock_.clear(std::memory_order_release);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  --t_table_depth;
}

std::size_t AllocTable::Home(std::uint64_t key) const {
  // Device pointers are at least 512-byte aligned; mix the remaining bits (Fibonacci hashing,
  // top bits of the product).
  std::uint64_t h = (key >> 9) * 0x9E3779B97F4A7C15ULL;
  return static_cast<std::size_t>(h >> 40) & (capacity_ - 1);
}

bool AllocTable::GrowLocked() {
  if (capacity_ >= max_capacity_) return false;
  std::size_t cap = capacity_ * 2;
  void* mem = mmap(nullptr, cap * sizeof(AllocEntry), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return false;
  AllocEntry* old = slots_;
  std::size_t old_cap = capacity_;
  slots_ = static_cast<AllocEntry*>(mem);
  capacity_ = cap;
  for (std::size_t i = 0; i < old_cap; ++i) {
    if (old[i].key == 0) continue;
    std::size_t j = Home(old[i].key);
    while (slots_[j].key != 0) j = (j + 1) & (capacity_ - 1);
    slots_[j] = old[i];
  }
  munmap(old, old_cap * sizeof(AllocEntry));
  return true;
}

bool AllocTable::Insert(const AllocEntry& entry) {
  if (entry.key == 0 || slots_ == nullptr || !LockTable()) return false;
  bool inserted = false;
  // Grow at 3/4 load; refuse only when growing is impossible and the table is 7/8 full.
  if (size_ >= capacity_ - capacity_ / 4) GrowLocked();
  if (size_ < capacity_ - capacity_ / 8) {
    std::size_t i = Home(entry.key);
    while (slots_[i].key != 0 && slots_[i].key != entry.key) i = (i + 1) & (capacity_ - 1);
    if (slots_[i].key == 0) {
      slots_[i] = entry;
      ++size_;
      inserted = true;
    }
  }
  UnlockTable();
  return inserted;
}

void AllocTable::EraseAtLocked(std::size_t i) {
  // Backward-shift deletion: pull later members of the probe run into the hole.
  std::size_t mask = capacity_ - 1;
  std::size_t hole = i;
  for (std::size_t j = (i + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
    std::size_t home = Home(slots_[j].key);
    bool movable = (j > hole) ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = AllocEntry{};
  --size_;
}

bool AllocTable::Erase(std::uint64_t key, AllocEntry* out) {
  if (key == 0 || slots_ == nullptr || !LockTable()) return false;
  std::size_t mask = capacity_ - 1;
  std::size_t i = Home(key);
  while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
  bool found = slots_[i].key == key;
  if (found) {
    *out = slots_[i];
    EraseAtLocked(i);
  }
  UnlockTable();
  return found;
}

bool AllocTable::Find(std::uint64_t key, AllocEntry* out) {
  if (key == 0 || slots_ == nullptr || !LockTable()) return false;
  std::size_t mask = capacity_ - 1;
  std::size_t i = Home(key);
  while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
  bool found = slots_[i].key == key;
  if (found) *out = slots_[i];
  UnlockTable();
  return found;
}

std::size_t AllocTable::EraseWhere(bool (*match)(const AllocEntry&, const void*), const void* arg,
                                   void (*done)(const AllocEntry&, void*), void* done_arg) {
  if (slots_ == nullptr || size_ == 0) return 0;
  // Matches are collected in batches (no allocation while locked), erased, and handed out after
  // the unlock.
  constexpr std::size_t kBatch = 256;
  AllocEntry batch[kBatch];
  std::size_t total = 0;
  for (;;) {
    if (!LockTable()) return total;
    std::size_t n = 0;
    for (std::size_t i = 0; i < capacity_ && n < kBatch;) {
      if (slots_[i].key != 0 && match(slots_[i], arg)) {
        batch[n++] = slots_[i];
        EraseAtLocked(i);  // a later entry may have shifted into i: look at i again
      } else {
        ++i;
      }
    }
    UnlockTable();
    for (std::size_t k = 0; k < n; ++k) done(batch[k], done_arg);
    total += n;
    if (n < kBatch) return total;
  }
}

}  // namespace hami::vgpu
