// A fixed-capacity map from device pointer (or VMM handle) to what was charged for it.
//
// Open addressing with linear probing and backward-shift deletion; storage is an anonymous
// mmap, kept small (cache-resident) and doubled at 3/4 load up to kMaxCapacity. Erase and
// lookups never allocate. Thread-safe (one spinlock; critical sections are a few probes). Key 0
// is reserved (no allocation is ever at address 0).
#ifndef HAMI_VGPU_ALLOC_TABLE_H_
#define HAMI_VGPU_ALLOC_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hami::vgpu {

struct AllocEntry {
  std::uint64_t key;
  std::uint64_t bytes;
  std::int32_t dev;  // container (NVML) index the bytes were charged to
  std::int32_t kind;
  std::uint64_t aux = 0;  // per table: the owning context, a mapping's size, ...
};

class AllocTable {
 public:
  AllocTable() = default;
  AllocTable(const AllocTable&) = delete;
  AllocTable& operator=(const AllocTable&) = delete;
  ~AllocTable();

  static constexpr std::size_t kMaxCapacity = std::size_t{1} << 22;

  // Initial capacity, rounded up to a power of two; the table grows up to `max_capacity` (also
  // a power of two, at most kMaxCapacity). Returns false when the mmap fails.
  bool Init(std::size_t capacity, std::size_t max_capacity = kMaxCapacity);
  // Drops every entry (after fork the child starts with no charges of its own).
  void Clear();
  // In a fork child: the lock may have been held by a parent thread that does not exist here.
  void ResetLockAfterFork() { lock_.clear(std::memory_order_relaxed); }

  // Returns false when the key is 0, already present, or the table is full (7/8 of the maximum
  // capacity). Also false, without waiting, when called from a signal handler that interrupted
  // this thread inside the table (the caller refuses the allocation: no self-deadlock).
  bool Insert(const AllocEntry& entry);
  // Removes the key and copies its entry to *out; false when absent (or re-entered, as above).
  bool Erase(std::uint64_t key, AllocEntry* out);
  // Copies the entry of `key` to *out without removing it; false when absent.
  bool Find(std::uint64_t key, AllocEntry* out);
  // Removes every entry for which match(entry, arg) is true and hands each to done(entry,
  // done_arg) after the table is unlocked. Returns how many. O(capacity): for rare events
  // (context destroyed, range unmapped).
  std::size_t EraseWhere(bool (*match)(const AllocEntry&, const void*), const void* arg,
                         void (*done)(const AllocEntry&, void*), void* done_arg);
  std::size_t size() const { return size_; }

 private:
  // False when this thread already holds a table lock (a signal handler re-entered the table).
  bool LockTable();
  bool GrowLocked();
  void UnlockTable();
  void EraseAtLocked(std::size_t i);
  std::size_t Home(std::uint64_t key) const;

  AllocEntry* slots_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t max_capacity_ = kMaxCapacity;
  std::size_t size_ = 0;
  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace hami::vgpu

#endif  // HAMI_VGPU_ALLOC_TABLE_H_
