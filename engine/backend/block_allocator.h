// Fixed-size KV blocks handed out from a free list. Not thread-safe: the generator/scheduler
// thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lmx {

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);

  int free_blocks() const { return int(free_.size()); }
  int total_blocks() const { return total_; }

  // Grows `table` to cover `tokens` positions of `block_size`; false (table unchanged) when there
  // are not enough free blocks.
  bool ensure(std::vector<int32_t>& table, int tokens, int block_size);
  void release(std::vector<int32_t>& table);

 private:
  int total_;
  std::vector<int32_t> free_;
};

}  // namespace lmx
