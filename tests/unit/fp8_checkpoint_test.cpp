// fp8 checkpoints (engine/model/quantization.h, CheckpointFp8) on the CPU backend, from checkpoints
// written here out of the same fp32 weights:
//  - compressed-tensors with per-channel scales, written by the reference quantizer
//    (quant::cpu::quantize_rows_e4m3), gives bitwise the logits of the fp32 weights loaded with
//    option.quantize=fp8: the codes and scales load as stored, and compute as option.quantize=fp8's;
//  - per-tensor scales (compressed-tensors "tensor" and AutoFP8) on weights whose rows share one
//    max |w|, so that per-channel and per-tensor quantization give the same codes: the same logits;
//  - at tensor_parallel_degree 2 each rank reads the scales of the rows it holds;
//  - clear errors: other quantization methods, block-scaled fp8, integer compressed-tensors, a
//    scale of the wrong shape or not positive, an fp8 tensor with no quantization_config, fp8 in
//    the LM head, option.quantize=dynamic_int8 on an fp8 checkpoint.
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/backend/cpu_backend.h"
#include "engine/core/error.h"
#include "engine/model/model.h"
#include "engine/model/quantization.h"
#include "engine/model/shard.h"
#include "tests/support/checkpoint_writer.h"
#include "tests/support/expect_error.h"
#include "tests/support/fp8_checkpoint_writer.h"

namespace lmx {
namespace {

using json = nlohmann::json;
using testing::TensorSpec;
using Tensors = std::map<std::string, TensorSpec>;
using ::testing::HasSubstr;
using testing::expect_error;

json config_with(json quantization_config) {
  json c = testing::tiny_llama_config();
  c["num_hidden_layers"] = 2;
  if (!quantization_config.is_null()) c["quantization_config"] = std::move(quantization_config);
  return c;
}

void write_model(const std::filesystem::path& dir, const json& config, const Tensors& tensors) {
  std::ofstream(dir / "config.json") << config.dump();
  testing::write_file(dir / "model.safetensors", testing::safetensors_bytes(tensors));
}

// Logits of a prompt's last token and of 3 teacher-forced decode steps.
std::vector<std::vector<float>> run(Backend& b) {
  const std::vector<int32_t> prompt = {1, 5, 9, 13, 2, 7}, path = {3, 4, 8};
  const std::vector<int32_t> blocks = {0};
  std::vector<std::vector<float>> rows;
  std::vector<float> logits;
  BatchChunk c{prompt, 0, blocks, true};
  b.forward(std::span(&c, 1), logits);
  rows.push_back(logits);
  for (size_t i = 0; i < path.size(); ++i) {
    BatchChunk d{std::span(&path[i], 1), int(prompt.size() + i), blocks, true};
    b.forward(std::span(&d, 1), logits);
    rows.push_back(logits);
  }
  return rows;
}

const KvCacheShape kKv{16, 8};

std::vector<std::vector<float>> run_model(const std::filesystem::path& dir, const LinearQuant& q = {},
                                          int degree = 1) {
  const LoadedModel m = load_model(dir, q);
  auto b = make_cpu_backend(m, kKv, degree);
  return run(*b);
}

TEST(Fp8Checkpoint, CompressedTensorsPerChannelGivesTheLogitsOfQuantizingAtLoad) {
  const json config = config_with(nullptr);
  const Tensors fp32 = testing::tiny_llama_tensors(config);
  testing::TempDir plain, fp8;
  write_model(plain.path(), config, fp32);
  write_model(fp8.path(), config_with(testing::compressed_tensors_config("channel")), testing::fp8_tensors(fp32, 2, false));
  const auto want = run_model(plain.path(), LinearQuant{QuantKind::Fp8});
  EXPECT_EQ(run_model(fp8.path()), want);
  EXPECT_EQ(run_model(fp8.path(), LinearQuant{QuantKind::Fp8}), want);  // option.quantize=fp8 too
  EXPECT_NE(run_model(plain.path()), want);  // fp8 changes the logits: the comparison can fail
}

TEST(Fp8Checkpoint, PerTensorScalesGiveTheLogitsOfQuantizingAtLoad) {
  const json config = config_with(nullptr);
  Tensors fp32 = testing::tiny_llama_tensors(config);
  testing::equalize_row_maxima(fp32, 2);
  testing::TempDir plain;
  write_model(plain.path(), config, fp32);
  const auto want = run_model(plain.path(), LinearQuant{QuantKind::Fp8});
  for (const json& qc : {testing::compressed_tensors_config("tensor"),
                         json{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}}) {
    SCOPED_TRACE(qc.dump());
    testing::TempDir fp8;
    write_model(fp8.path(), config_with(qc), testing::fp8_tensors(fp32, 2, true));
    EXPECT_EQ(run_model(fp8.path()), want);
  }
}

// Each rank's projections carry the scales of the rows it holds: column-parallel q/k/v and
// gate/up a half of each part's rows, row-parallel o and down every output row.
TEST(Fp8Checkpoint, TensorParallelRanksReadTheScalesOfTheirRows) {
  const json config = config_with(testing::compressed_tensors_config("channel"));
  const Tensors t = testing::fp8_tensors(testing::tiny_llama_tensors(config), 2, false);
  testing::TempDir fp8;
  write_model(fp8.path(), config, t);
  const LoadedModel m = load_model(fp8.path());
  const auto scales = [&](int l, const std::string& p) {
    return t.at(testing::llama_projection(l, p) + ".weight_scale").values;
  };
  for (int rank : {0, 1}) {
    const ModelWeightRefs mine = shard_weights(m.weights, m.desc, {rank, 2});
    const auto halves = [&](int l, std::initializer_list<const char*> parts) {
      std::vector<float> out;
      for (const char* p : parts) {
        const std::vector<float> v = scales(l, p);
        const size_t n = v.size() / 2;
        out.insert(out.end(), v.begin() + long(rank * n), v.begin() + long((rank + 1) * n));
      }
      return out;
    };
    for (int l = 0; l < 2; ++l) {
      SCOPED_TRACE("rank " + std::to_string(rank) + ", layer " + std::to_string(l));
      const LayerWeightRefs& L = mine.layers[size_t(l)];
      for (const LinearRef* p : {&L.qkv, &L.o, &L.up, &L.down}) ASSERT_TRUE(p->quant.checkpoint_scales);
      EXPECT_EQ(*L.qkv.quant.checkpoint_scales,
                halves(l, {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}));
      EXPECT_EQ(*L.up.quant.checkpoint_scales, halves(l, {"mlp.gate_proj", "mlp.up_proj"}));
      EXPECT_EQ(*L.o.quant.checkpoint_scales, scales(l, "self_attn.o_proj"));
      EXPECT_EQ(*L.down.quant.checkpoint_scales, scales(l, "mlp.down_proj"));
    }
  }
  // And the split model runs (its activations are quantized per rank's columns in o and down,
  // so its logits are not degree 1's bit for bit).
  EXPECT_EQ(run_model(fp8.path(), {}, 2).size(), 4u);
}

class Fp8CheckpointErrors : public ::testing::Test {
 protected:
  // The per-channel checkpoint with `edit` applied to its config and tensors, loaded.
  template <typename Edit>
  void load_edited(Edit&& edit, const LinearQuant& q = {}) {
    json config = config_with(testing::compressed_tensors_config("channel"));
    Tensors t = testing::fp8_tensors(testing::tiny_llama_tensors(config), 2, false);
    edit(config, t);
    write_model(dir_.path(), config, t);
    load_model(dir_.path(), q);
  }
  testing::TempDir dir_;
};

TEST_F(Fp8CheckpointErrors, OtherQuantizationMethodsAreNamed) {
  expect_error([&] { load_edited([](json& c, Tensors&) { c["quantization_config"] = {{"quant_method", "gptq"}}; }); },
               {"already quantized (quantization_config.quant_method = 'gptq')", "does not load"});
  expect_error([&] {
    load_edited([](json& c, Tensors&) {
      c["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
    });
  }, {"block-scaled fp8", "[128,128]"});
  expect_error([&] {
    load_edited([](json& c, Tensors&) {
      c["quantization_config"]["config_groups"]["group_0"]["weights"]["type"] = "int";
    });
  }, {"config_groups.group_0.weights", "type \"int\""});
  expect_error([&] {
    load_edited([](json& c, Tensors&) {
      c["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = "group";
    });
  }, {"strategy \"group\" is not supported"});
}

TEST_F(Fp8CheckpointErrors, MalformedScalesAreNamed) {
  const std::string scale = testing::llama_projection(1, "mlp.down_proj") + ".weight_scale";
  expect_error([&] { load_edited([&](json&, Tensors& t) { t[scale].shape = {3}; t[scale].values.resize(3); }); },
               {scale, "has shape [3]", "per output channel"});
  expect_error([&] { load_edited([&](json&, Tensors& t) { t[scale].values[2] = 0.0f; }); },
               {scale, "must be positive"});
  expect_error([&] { load_edited([&](json&, Tensors& t) { t.erase(scale); }); },
               {"missing tensor '" + scale + "'"});
}

TEST_F(Fp8CheckpointErrors, Fp8TensorsNeedTheirConfigAndStayInTheDecoder) {
  expect_error([&] { load_edited([](json& c, Tensors&) { c.erase("quantization_config"); }); },
               {"dtype F8_E4M3, expected F32, F16 or BF16", "config.json declares them"});
  expect_error([&] {
    load_edited([](json&, Tensors& t) {
      TensorSpec& head = t["lm_head.weight"];
      head.dtype = "F8_E4M3";
      head.bytes.assign(head.values.size(), 0x38);  // 1.0
      head.values.clear();
      t["lm_head.weight_scale"] = TensorSpec{"F32", {1}, {1.0f}, {}};
    });
  }, {"'lm_head.weight' is stored in fp8", "decoder's"});
  expect_error([&] { load_edited([](json&, Tensors&) {}, dynamic_int8()); },
               {"already quantized (compressed-tensors fp8)", "option.quantize=dynamic_int8"});
}

}  // namespace
}  // namespace lmx
