// Closed value sets of ServingConfig and their property spellings.
#pragma once

#include <string_view>

namespace lmx::properties {

enum class Dtype { Auto, Fp32, Fp16, Bf16 };
enum class Device { Cpu, Cuda };  // option.device=auto is resolved at load time
enum class Quantize { None, DynamicInt8, SmoothQuant, Fp8 };
enum class RollingBatch { Auto, Disable };
enum class OutputFormatter { Json, JsonLines, Sse };
enum class KvCacheDtype { Auto, Fp8E4m3 };  // Auto: the model's (compute) dtype

// Canonical spellings, as accepted in serving.properties and printed by `lmx config`.
std::string_view to_string(Dtype v);
std::string_view to_string(Device v);
std::string_view to_string(Quantize v);  // None -> "none"
std::string_view to_string(RollingBatch v);
std::string_view to_string(OutputFormatter v);
std::string_view to_string(KvCacheDtype v);  // Fp8E4m3 -> "fp8_e4m3"

// option.quantize_group_size (dynamic_int8): input columns per scale, a power of two from 4 to
// 65536 (whole 32-bit words of int8 values; 64 or 128 are the usual choices). Whether it divides
// each projection's input size is checked when the model loads (docs/quantization.md).
bool valid_quantize_group_size(long long n);
inline constexpr std::string_view kQuantizeGroupSizeAllowed = "a power of two from 4 to 65536";
inline constexpr int kCudaMinQuantizeGroupSize = 64;  // kernels/linear.h: kScaleGroupStep

}  // namespace lmx::properties
