// fp8 checkpoints (engine/model/quantization.h, CheckpointFp8) on the CPU backend, from checkpoints
// written here out of the same fp32 weights:
//  - compressed-tensors with per-channel scales, written by the reference quantizer
//    (quant::cpu::quantize_rows_e4m3), gives bitwise the logits of the fp32 weights loaded with
//    option.quantize=fp8: the codes and scales load as stored, and compute as
//    option.quantize=fp8's;
//  - per-tensor scales (compressed-tensors "tensor" and AutoFP8) on weights whose rows share one
//    max |w|, so that per-channel and per-tensor quantization give the same codes: the same logits;
//  - at tensor_parallel_degree 2 each rank reads the scales of the rows it holds;
//  - clear errors: other quantization methods, integer compressed-tensors, a scale of the wrong
//    shape or not positive, an fp8 tensor with no quantization_config, fp8 in the LM head,
//    option.quantize=dynamic_int8 on an fp8 checkpoint;
//  - block-scaled fp8 (weight_block_size [128, 128], weight_scale_inv [ceil(out / 128), in / 128]):
//    block scales equal to the rows' give option.quantize=fp8's codes, scales and logits (bitwise
//    with one group a row); different block scales compute as the dequantized weights; each
//    tensor-parallel rank holds its rows' and columns' scales; errors for other block sizes,
//    wrong or missing weight_scale_inv, partial blocks and ranks that split a group.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
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
#include "kernels/kv_dtype.h"
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
  expect_error(
      [&] {  // block-scaled: hidden 16 is not whole blocks
        load_edited([](json& c, Tensors&) {
          c["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
        });
      },
      {"'model.layers.0.self_attn.q_proj.weight' is a block-scaled fp8 weight of 16 input columns",
       "partial last block"});
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

// ---- Block-scaled fp8 (transformers' weight_block_size [128, 128], weight_scale_inv) ----------

// A 2-layer tiny Llama of hidden and intermediate sizes multiples of 128 (4 heads of hidden / 4).
json block_model_config(int64_t hidden, int64_t intermediate, json quantization_config) {
  json c = config_with(std::move(quantization_config));
  c["hidden_size"] = hidden;
  c["intermediate_size"] = intermediate;
  return c;
}

// The largest |a - b| over all logits, and the largest |b|.
std::pair<float, float> max_diff(const std::vector<std::vector<float>>& a,
                                 const std::vector<std::vector<float>>& b) {
  float diff = 0, peak = 0;
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = 0; j < b[i].size(); ++j) {
      diff = std::max(diff, std::fabs(a.at(i).at(j) - b[i][j]));
      peak = std::max(peak, std::fabs(b[i][j]));
    }
  return {diff, peak};
}

// Each projection's checkpoint scales as shard_weights hands them to a backend, rank `rank` of
// `ranks`, with their group.
void expect_block_scales(
    const LoadedModel& m, TensorParallelRank tp,
    const std::function<std::vector<float>(int, const LinearRef&, int)>& want) {
  const ModelWeightRefs mine = shard_weights(m.weights, m.desc, tp);
  for (int l = 0; l < 2; ++l) {
    const LayerWeightRefs& L = mine.layers[size_t(l)];
    int which = 0;
    for (const LinearRef* p : {&L.qkv, &L.o, &L.up, &L.down}) {
      SCOPED_TRACE("layer " + std::to_string(l) + ", " + p->weight.name);
      ASSERT_TRUE(p->quant.checkpoint_scales);
      EXPECT_EQ(p->quant.kind, QuantKind::Fp8);
      EXPECT_EQ(p->quant.group, testing::kFp8Block);
      EXPECT_EQ(p->quant.group_for(p->in), testing::kFp8Block);
      EXPECT_EQ(*p->quant.checkpoint_scales, want(l, *p, which++));
    }
  }
}

// The projections' parts in LinearRef order: q, k, v | o | gate, up | down.
const std::vector<std::vector<const char*>> kParts = {
    {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
    {"self_attn.o_proj"},
    {"mlp.gate_proj", "mlp.up_proj"},
    {"mlp.down_proj"}};

// Per-row scales expanded to [rows, in / 128] from each part's weight_scale_inv: row o of a
// part gets its block row o / 128; rows [row_begin, row_end) of each part (a rank's share of
// each part's rows) and block columns [col_begin, col_end).
std::vector<float> expanded_block_scales(const Tensors& t, int layer, int which, int rank,
                                         int ranks, bool split_rows, bool split_cols) {
  std::vector<float> out;
  for (const char* part : kParts[size_t(which)]) {
    const std::string name = testing::llama_projection(layer, part);
    const TensorSpec& s = t.at(name + ".weight_scale_inv");
    const int64_t rows = t.at(name + ".weight").shape[0], cols = s.shape[1];
    const int64_t r0 = split_rows ? rows / ranks * rank : 0,
                  r1 = split_rows ? r0 + rows / ranks : rows;
    const int64_t c0 = split_cols ? cols / ranks * rank : 0,
                  c1 = split_cols ? c0 + cols / ranks : cols;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) out.push_back(s.values[size_t(r / 128 * cols + c)]);
  }
  return out;
}

// Block scales equal to the rows' (every 128 x 128 block's max |w| is its rows'): the codes and
// scales are option.quantize=fp8's from the same fp32 weights. With one group a row (in = 128)
// the linear is the per-row one: bitwise the logits. With two groups (in = 256) each group's sum
// is scaled on its own (quant/fp8.h), which rounds differently from scaling the whole row's sum
// once: the logits then agree to fp32 summation rounding (measured: see kSumRounding).
TEST(Fp8BlockCheckpoint, BlockScalesEqualToRowScalesGiveTheLogitsOfQuantizingAtLoad) {
  for (const int64_t size : {int64_t(128), int64_t(256)}) {
    SCOPED_TRACE("hidden and intermediate " + std::to_string(size));
    const json config = block_model_config(size, size, nullptr);
    Tensors fp32 = testing::tiny_llama_tensors(config);
    testing::equalize_row_maxima(fp32, 2, testing::kFp8Block);
    testing::TempDir plain, fp8;
    write_model(plain.path(), config, fp32);
    const Tensors block = testing::fp8_block_tensors(fp32, 2);
    write_model(fp8.path(), block_model_config(size, size, testing::block_fp8_config()), block);
    // The codes are the per-row quantizer's, byte for byte (same scale, same division).
    const Tensors per_row = testing::fp8_tensors(fp32, 2, false);
    for (const auto& [name, spec] : per_row) {
      if (spec.dtype == "F8_E4M3") {
        EXPECT_EQ(block.at(name).bytes, spec.bytes) << name;
      }
    }
    // ... and every projection's block scales are its rows' scales.
    const LoadedModel m = load_model(fp8.path());
    expect_block_scales(m, {0, 1}, [&](int l, const LinearRef& p, int which) {
      std::vector<float> want;
      for (const char* part : kParts[size_t(which)]) {
        const std::vector<float>& rows =
            per_row.at(testing::llama_projection(l, part) + ".weight_scale").values;
        for (float v : rows) want.insert(want.end(), size_t(p.in / testing::kFp8Block), v);
      }
      return want;
    });
    const auto want = run_model(plain.path(), LinearQuant{QuantKind::Fp8});
    const auto got = run_model(fp8.path());
    EXPECT_EQ(run_model(fp8.path(), LinearQuant{QuantKind::Fp8}), got);  // option.quantize=fp8 too
    EXPECT_NE(run_model(plain.path()), want);  // fp8 changes the logits: the comparison can fail
    if (size == 128) {
      EXPECT_EQ(got, want);
    } else {
      // fp32 sums of 128-term groups added after scaling instead of one 256-term sum: a few ulps
      // of the sums' magnitudes, through 2 layers.
      const auto [diff, peak] = max_diff(got, want);
      EXPECT_LE(diff, 1e-5f * peak) << "peak " << peak;
    }
  }
}

// Weights whose 128 x 128 blocks differ in magnitude (factors 1/4 to 4), quantized per block:
// the block-scaled checkpoint computes with its block scales, so its logits are the fp32 model
// of its dequantized weights (e4m3(q) * scale_inv) up to the per-token activation quantization,
// and not those of quantizing the same weights per row.
class Fp8BlockScaled : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = block_model_config(256, 256, nullptr);
    Tensors fp32 = testing::tiny_llama_tensors(config_);
    testing::vary_block_magnitudes(fp32);
    block_ = testing::fp8_block_tensors(fp32, 2);
    write_model(fp8_.path(), block_model_config(256, 256, testing::block_fp8_config()), block_);
    write_model(dequantized_.path(), config_, testing::dequantized_block_tensors(block_));
  }
  json config_;
  Tensors block_;
  testing::TempDir fp8_, dequantized_;
};

TEST_F(Fp8BlockScaled, LogitsAreTheDequantizedModelsUpToActivationQuantization) {
  const auto got = run_model(fp8_.path());
  const auto fp32 = run_model(dequantized_.path());
  const auto per_row = run_model(dequantized_.path(), LinearQuant{QuantKind::Fp8});
  const auto [diff, peak] = max_diff(got, fp32);
  const auto [row_diff, row_peak] = max_diff(per_row, fp32);
  // Only the activations are quantized here (E4M3: up to 1/16 relative an element), and these
  // tiny random models amplify it (weights up to 4x, sharp attention): measured 0.82 at a peak
  // logit of 8.5. A misapplied block scale would be off by factors of 2 to 16.
  EXPECT_LE(diff, 0.15f * peak) << "peak " << peak << ", per row " << row_diff;
  EXPECT_GT(diff, 0.0f);
  EXPECT_NE(got, per_row);  // per-row scales requantize these weights: other logits
  // ... which adds the weights' requantization error (measured 1.11).
  EXPECT_LT(diff, row_diff);
}

// Tensor-parallel ranks: column-parallel q/k/v and gate/up hold their rows' block scales (k and
// v of 128 rows split in two halves of one block row), row-parallel o and down each rank's half of
// the scale columns (128 input columns each); the split model gives degree 1's logits up to the
// per-rank activation quantization of o and down (their activations are quantized over the
// rank's columns).
TEST_F(Fp8BlockScaled, TensorParallelRanksHoldTheirRowsAndGroups) {
  const LoadedModel m = load_model(fp8_.path());
  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    expect_block_scales(m, {rank, 2}, [&](int l, const LinearRef&, int which) {
      const bool column = which == 0 || which == 2;
      return expanded_block_scales(block_, l, which, rank, 2, column, !column);
    });
  }
  const auto whole = run_model(fp8_.path());
  const auto split = run_model(fp8_.path(), {}, 2);
  // As above, the activation quantization's size (measured 0.68 at a peak of 8.3): a rank
  // holding another rank's (or row's) block scales would be off by factors of 2 to 16.
  const auto [diff, peak] = max_diff(split, whole);
  EXPECT_LE(diff, 0.15f * peak) << "peak " << peak;
}

class Fp8BlockCheckpointErrors : public ::testing::Test {
 protected:
  // The block-scaled checkpoint of hidden 256 and `intermediate` with `edit` applied, loaded.
  template <typename Edit>
  LoadedModel load_edited(Edit&& edit, int64_t intermediate = 256) {
    json config = block_model_config(256, intermediate, testing::block_fp8_config());
    Tensors t = testing::fp8_block_tensors(testing::tiny_llama_tensors(config), 2);
    edit(config, t);
    write_model(dir_.path(), config, t);
    return load_model(dir_.path());
  }
  testing::TempDir dir_;
};

TEST_F(Fp8BlockCheckpointErrors, ConfigAndScalesAreChecked) {
  expect_error(
      [&] {
        load_edited([](json& c, Tensors&) {
          c["quantization_config"]["weight_block_size"] = {64, 64};
        });
      },
      {"weight_block_size [64,64] is not supported", "[128, 128]"});
  expect_error(
      [&] {
        load_edited(
            [](json& c, Tensors&) { c["quantization_config"]["weight_block_size"] = "128"; });
      },
      {"weight_block_size \"128\" is not supported"});
  const std::string scale = testing::llama_projection(1, "mlp.down_proj") + ".weight_scale_inv";
  expect_error(
      [&] {
        load_edited([&](json&, Tensors& t) {
          t[scale].shape = {2, 1};
          t[scale].values.resize(2);
        });
      },
      {scale, "has shape [2, 1]", "[256, 256] in 128 x 128 blocks are [2, 2]"});
  expect_error([&] { load_edited([&](json&, Tensors& t) { t.erase(scale); }); },
               {"missing tensor '" + scale + "'"});
  expect_error([&] { load_edited([&](json&, Tensors& t) { t[scale].values[3] = -1.0f; }); },
               {scale, "must be positive"});
  // A per-tensor or per-channel scale beside the weight is not this layout's.
  expect_error(
      [&] {
        load_edited([&](json&, Tensors& t) {
          t[testing::llama_projection(0, "self_attn.o_proj") + ".weight_scale"] =
              t.at(testing::llama_projection(0, "self_attn.o_proj") + ".weight_scale_inv");
          t.erase(testing::llama_projection(0, "self_attn.o_proj") + ".weight_scale_inv");
        });
      },
      {"missing tensor 'model.layers.0.self_attn.o_proj.weight_scale_inv'"});
  // Input columns not a multiple of 128: the last block would be partial.
  expect_error([&] { load_edited([](json&, Tensors&) {}, 192); },
               {"'model.layers.0.mlp.down_proj.weight' is a block-scaled fp8 weight of 192 input "
                "columns",
                "block size 128", "partial last block"});
}

TEST_F(Fp8BlockCheckpointErrors, RankColumnsMustBeWholeGroups) {
  const LoadedModel m = load_edited([](json&, Tensors&) {}, 384);  // down: 192 columns a rank
  expect_error([&] { make_cpu_backend(m, kKv, 2); },
               {"'model.layers.0.mlp.down_proj.weight' is block-scaled fp8", "rank 0 of 2",
                "(192 columns)", "whole groups of 128"});
  EXPECT_EQ(run_model(dir_.path()).size(), 4u);  // degree 1 loads
}

TEST_F(Fp8BlockCheckpointErrors, StaticActivationSchemeLoads) {  // with a warning (not used)
  const LoadedModel m = load_edited(
      [](json& c, Tensors&) { c["quantization_config"]["activation_scheme"] = "static"; });
  EXPECT_EQ(m.quantization.value("checkpoint", ""), "fp8 (block-scaled 128 x 128)");
}

}  // namespace
}  // namespace lmx
