#include "properties/config_enums.h"

namespace lmx::properties {

std::string_view to_string(Dtype v) {
  switch (v) {
    case Dtype::Auto:
      return "auto";
    case Dtype::Fp32:
      return "fp32";
    case Dtype::Fp16:
      return "fp16";
    case Dtype::Bf16:
      return "bf16";
  }
  return "?";
}

std::string_view to_string(Device v) {
  switch (v) {
    case Device::Cpu:
      return "cpu";
    case Device::Cuda:
      return "cuda";
  }
  return "?";
}

std::string_view to_string(Quantize v) {
  switch (v) {
    case Quantize::None:
      return "none";
    case Quantize::DynamicInt8:
      return "dynamic_int8";
    case Quantize::SmoothQuant:
      return "smoothquant";
    case Quantize::Fp8:
      return "fp8";
  }
  return "?";
}

std::string_view to_string(RollingBatch v) {
  switch (v) {
    case RollingBatch::Auto:
      return "auto";
    case RollingBatch::Disable:
      return "disable";
  }
  return "?";
}

std::string_view to_string(OutputFormatter v) {
  switch (v) {
    case OutputFormatter::Json:
      return "json";
    case OutputFormatter::JsonLines:
      return "jsonlines";
    case OutputFormatter::Sse:
      return "sse";
  }
  return "?";
}

std::string_view to_string(KvCacheDtype v) {
  switch (v) {
    case KvCacheDtype::Auto:
      return "auto";
    case KvCacheDtype::Fp8E4m3:
      return "fp8_e4m3";
  }
  return "?";
}

bool valid_quantize_group_size(long long n) { return n >= 4 && n <= 65536 && (n & (n - 1)) == 0; }

}  // namespace lmx::properties
