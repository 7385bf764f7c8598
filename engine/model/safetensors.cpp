#include "engine/model/safetensors.h"

#include <algorithm>

#include <cstring>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace lmx {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

using json = nlohmann::json;

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw_error("{}: negative dimension in shape {}", where, shape_str(shape));
    if (d != 0 && n > INT64_MAX / d) throw_error("{}: shape {} overflows", where, shape_str(shape));
    n *= d;
  }
  return n;
}

TensorView parse_entry(const std::string& name, const json& entry, std::span<const std::byte> data,
                       const std::string& file) {
  const std::string where = fmt::format("{}: tensor '{}'", file, name);
  if (!entry.is_object()) throw_error("{}: header entry is not an object", where);
  if (!entry.contains("dtype") || !entry["dtype"].is_string())
    throw_error("{}: header entry has no string 'dtype'", where);
  if (!entry.contains("shape") || !entry["shape"].is_array())
    throw_error("{}: header entry has no array 'shape'", where);
  if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
      entry["data_offsets"].size() != 2)
    throw_error("{}: header entry has no two-element 'data_offsets'", where);

  TensorView view;
  view.name = name;
  const std::string dtype = entry["dtype"].get<std::string>();
  auto parsed = dtype_from_safetensors(dtype);
  if (!parsed && dtype == "F8_E5M2")
    throw_error("{}: dtype F8_E5M2 (fp8 weights with 2 mantissa bits) is not supported: LMX loads "
                "F32, F16 and BF16 checkpoints, and fp8 checkpoints in F8_E4M3 "
                "(docs/quantization.md)",
                where);
  if (!parsed) throw_error("{}: unknown dtype '{}'", where, dtype);
  view.dtype = *parsed;
  for (const json& d : entry["shape"]) {
    if (!d.is_number_integer()) throw_error("{}: shape holds a non-integer", where);
    view.shape.push_back(d.get<int64_t>());
  }
  const json& offsets = entry["data_offsets"];
  if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    throw_error("{}: data_offsets must be non-negative integers", where);
  const uint64_t begin = offsets[0].get<uint64_t>();
  const uint64_t end = offsets[1].get<uint64_t>();
  if (begin > end || end > data.size())
    throw_error(
        "{}: data_offsets [{}, {}] out of range (data section holds {} bytes; file "
        "truncated?)",
        where, begin, end, data.size());
  const uint64_t numel = uint64_t(checked_numel(view.shape, where));
  if (numel > UINT64_MAX / dtype_size(view.dtype))  // the byte count would wrap (a [2^62] tensor)
    throw_error("{}: shape {} of {} overflows a 64-bit byte count", where, shape_str(view.shape),
                dtype);
  const uint64_t expected = numel * dtype_size(view.dtype);
  if (end - begin != expected)
    throw_error("{}: data_offsets span {} bytes but {} {} needs {}", where, end - begin, dtype,
                shape_str(view.shape), expected);
  view.data = data.subspan(begin, end - begin);
  return view;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : map_(std::make_unique<MappedFile>(path)) {
  const std::string file = path.string();
  const std::span<const std::byte> bytes = map_->bytes();
  if (bytes.size() < 8)
    throw_error("{}: not a safetensors file ({} bytes, truncated?)", file, bytes.size());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);  // little-endian host assumed (x86-64, aarch64)
  if (header_len > kMaxHeaderBytes || header_len > bytes.size() - 8)
    throw_error("{}: header length {} exceeds the file ({} bytes; truncated or not safetensors)",
                file, header_len, bytes.size());
  const char* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  json header = json::parse(header_begin, header_begin + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    throw_error("{}: header is not a JSON object", file);
  const std::span<const std::byte> data = bytes.subspan(8 + header_len);

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw_error("{}: __metadata__ is not an object", file);
      for (const auto& [k, v] : entry.items())
        if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    TensorView view = parse_entry(name, entry, data, file);
    view.file = &map_->path();
    tensors_.emplace(name, std::move(view));
  }
  check_data_layout(data.size(), file);
}

// The safetensors format indexes its data section entirely, tensor after tensor: overlapping
// tensors (one write seen through two names) or bytes no tensor covers (a polyglot file) are
// refused, as the reference library refuses them.
void SafetensorsFile::check_data_layout(size_t data_bytes, const std::string& file) const {
  std::vector<std::pair<std::span<const std::byte>, const std::string*>> spans;
  for (const auto& [name, view] : tensors_) spans.emplace_back(view.data, &name);
  if (spans.empty()) return;
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
    return a.first.data() != b.first.data() ? a.first.data() < b.first.data()
                                            : a.first.size() < b.first.size();
  });
  const std::byte* base = map_->bytes().data() + (map_->bytes().size() - data_bytes);
  size_t covered = 0;  // bytes of the data section before `covered` belong to a tensor
  const std::string* previous = nullptr;
  for (const auto& [span, name] : spans) {
    const size_t begin = size_t(span.data() - base), end = begin + span.size();
    if (begin < covered)
      throw_error("{}: tensor '{}' (data_offsets [{}, {}]) overlaps tensor '{}' (ending at {})",
                  file, *name, begin, end, *previous, covered);
    if (begin > covered)
      throw_error(
          "{}: data section bytes [{}, {}) belong to no tensor (safetensors indexes its "
          "data entirely; the file is corrupt or not safetensors)",
          file, covered, begin);
    covered = end;
    previous = name;
  }
  if (covered != data_bytes)
    throw_error(
        "{}: data section bytes [{}, {}) belong to no tensor (safetensors indexes its "
        "data entirely; the file is corrupt or not safetensors)",
        file, covered, data_bytes);
}

}  // namespace lmx
