#include "engine/backend/block_allocator.h"

namespace lmx {

BlockAllocator::BlockAllocator(int num_blocks) : total_(num_blocks) {
  free_.reserve(size_t(num_blocks));
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out low ids first
}

bool BlockAllocator::ensure(std::vector<int32_t>& table, int tokens, int block_size) {
  const size_t needed = size_t((tokens + block_size - 1) / block_size);
  if (needed <= table.size()) return true;
  if (needed - table.size() > free_.size()) return false;
  while (table.size() < needed) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void BlockAllocator::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

}  // namespace lmx
