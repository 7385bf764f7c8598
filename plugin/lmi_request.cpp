#include "plugin/lmi_request.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "engine/generate/top_logprobs.h"
#include "plugin/json_bounds.h"

namespace lmx::plugin {
namespace {

using nlohmann::json;

int get_int(const json& v, const std::string& field, long long lo, long long hi) {
  if (!v.is_number_integer() && !v.is_number_unsigned()) {
    // Accept 5.0 (some clients send floats), reject 5.5.
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
        std::isfinite(v.get<double>())) {
      double d = v.get<double>();
      if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
        throw_field_error(field, fmt::format("must be between {} and {}, got {}", lo, hi, d));
      }
      return static_cast<int>(d);
    }
    throw_field_error(field, fmt::format("must be an integer, got {}", json_bounds::quote(v)));
  }
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(hi)) {
    throw_field_error(
        field, fmt::format("must be between {} and {}, got {}", lo, hi, json_bounds::quote(v)));
  }
  long long x = v.get<long long>();
  if (x < lo || x > hi)
    throw_field_error(field, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return static_cast<int>(x);
}

float get_float(const json& v, const std::string& field) {
  if (!v.is_number())
    throw_field_error(field, fmt::format("must be a number, got {}", json_bounds::quote(v)));
  double d = v.get<double>();
  if (!std::isfinite(d)) throw_field_error(field, "must be finite");
  return static_cast<float>(d);
}

bool get_bool(const json& v, const std::string& field) {
  if (!v.is_boolean())
    throw_field_error(field, fmt::format("must be true or false, got {}", json_bounds::quote(v)));
  return v.get<bool>();
}

void parse_parameters(const json& p, LmiRequest& r) {
  if (!p.is_object()) throw_field_error("parameters", "must be a JSON object");
  auto& s = r.params.sampling;
  bool temperature_set = false;
  for (const auto& [key, v] : p.items()) {
    const std::string field = "parameters." + json_bounds::clip(key);
    if (v.is_null()) continue;  // clients send null for "unset"
    if (key == "max_new_tokens") {
      r.params.max_new_tokens = get_int(v, field, 1, std::numeric_limits<int>::max());
    } else if (key == "temperature") {
      s.temperature = get_float(v, field);
      if (s.temperature < 0)
        throw_field_error(field, fmt::format("must be >= 0, got {}", json_bounds::quote(v)));
      temperature_set = true;
    } else if (key == "top_p") {
      s.top_p = get_float(v, field);
      if (!(s.top_p > 0 && s.top_p <= 1))
        throw_field_error(field, fmt::format("must be in (0, 1], got {}", json_bounds::quote(v)));
    } else if (key == "top_k") {
      s.top_k = get_int(v, field, 0, std::numeric_limits<int>::max());
    } else if (key == "do_sample") {
      s.greedy = !get_bool(v, field);
    } else if (key == "repetition_penalty") {
      s.repetition_penalty = get_float(v, field);
      if (!(s.repetition_penalty > 0))
        throw_field_error(field, fmt::format("must be > 0, got {}", json_bounds::quote(v)));
    } else if (key == "stop_sequences" || key == "stop") {
      if (v.is_string()) {
        r.params.stop_sequences.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].is_string() || v[i].get<std::string>().empty()) {
            throw_field_error(fmt::format("{}[{}]", field, i), "must be a non-empty string");
          }
          r.params.stop_sequences.push_back(v[i].get<std::string>());
        }
      } else {
        throw_field_error(field, "must be a string or a list of strings");
      }
    } else if (key == "seed") {
      if (v.is_number_unsigned()) {
        s.seed = v.get<unsigned long long>();
      } else {
        s.seed = static_cast<uint64_t>(get_int(v, field, 0, std::numeric_limits<int>::max()));
      }
    } else if (key == "details") {
      r.details = get_bool(v, field);
    } else if (key == "return_full_text") {
      r.return_full_text = get_bool(v, field);
    } else if (key == "ignore_eos" || key == "ignore_eos_token") {
      r.params.ignore_eos = get_bool(v, field);
    } else if (key == "top_n_tokens") {  // TGI's: each token's most likely alternatives
      r.params.top_logprobs = get_int(v, field, 0, kMaxTopLogprobs);
    } else if (key == "decoder_input_details" || key == "truncate" || key == "typical_p" ||
               key == "watermark" || key == "best_of") {
      // TGI parameters that LMI accepts: only their neutral values are honoured.
      bool neutral = (key == "decoder_input_details" || key == "watermark")
                         ? (v.is_boolean() && !v.get<bool>())
                         : (key == "best_of" ? v == 1 : false);
      if (!neutral) throw_field_error(field, "is not supported by LMX");
    } else {
      throw_field_error(field,
                        "unknown parameter; allowed: max_new_tokens, temperature, top_p, top_k, "
                        "do_sample, repetition_penalty, stop_sequences, seed, details, "
                        "return_full_text, ignore_eos, top_n_tokens");
    }
  }
  // temperature 0 means greedy (as in vLLM/TGI); any sampling knob without do_sample is ignored
  // by the greedy path, as in transformers.
  if (temperature_set && s.temperature == 0) {
    s.greedy = true;
    s.temperature = 1.0f;
  }
}

}  // namespace

LmiRequest parse_lmi_request(const std::string& body) {
  json j;
  switch (json_bounds::parse(body, j)) {
    case json_bounds::ParseStatus::TooDeep:
      throw_field_error("body", json_bounds::too_deep_message());
    case json_bounds::ParseStatus::Malformed:
      throw_field_error("body", "is not valid JSON");
    case json_bounds::ParseStatus::Ok:
      break;
  }
  return parse_lmi_request(j);
}

LmiRequest parse_lmi_request(const json& body) {
  if (!body.is_object()) throw_field_error("body", "must be a JSON object with \"inputs\"");
  LmiRequest r;
  auto in = body.find("inputs");
  if (in == body.end()) {
    in = body.find("prompt");  // some clients send "prompt"
    if (in == body.end()) throw_field_error("inputs", "is required");
  }
  if (in->is_string()) {
    r.inputs.push_back(in->get<std::string>());
  } else if (in->is_array()) {
    if (in->empty()) throw_field_error("inputs", "must not be an empty list");
    r.batched = true;
    for (size_t i = 0; i < in->size(); ++i) {
      if (!(*in)[i].is_string())
        throw_field_error(fmt::format("inputs[{}]", i), "must be a string");
      r.inputs.push_back((*in)[i].get<std::string>());
    }
  } else {
    throw_field_error("inputs", "must be a string or a list of strings");
  }
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (r.inputs[i].empty()) {
      throw_field_error(r.batched ? fmt::format("inputs[{}]", i) : std::string("inputs"),
                        "must not be empty");
    }
  }
  if (auto p = body.find("parameters"); p != body.end() && !p->is_null()) parse_parameters(*p, r);
  if (auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    r.stream = get_bool(*s, "stream");
  }
  for (const auto& [key, v] : body.items()) {
    if (key != "inputs" && key != "prompt" && key != "parameters" && key != "stream") {
      throw_field_error(json_bounds::clip(key),
                        "unknown request field; allowed: inputs, parameters, stream");
    }
  }
  return r;
}

}  // namespace lmx::plugin
