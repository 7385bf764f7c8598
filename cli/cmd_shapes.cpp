// lmx shapes [--config NAME]
// Lists the known model shapes of `lmx bench --shape`, or prints one's config.json (the published
// model's, with "lmx_random_weights" so that the engine makes random weights in GPU memory):
// scripts/make_bench_model.sh writes it into a benchmark model directory.
#include <cstdio>
#include <iostream>

#include "args.h"
#include "commands.h"
#include "engine/model/known_shapes.h"

namespace lmx::cli {

int run_shapes(int argc, char** argv) {
  const Args args(argc, argv, {"--config"}, {"--help", "-h"});
  if (args.has("--help") || args.has("-h")) {
    std::fputs("usage: lmx shapes [--config NAME]\n"
               "Lists the known shapes, or prints NAME's config.json with random weights.\n",
               stdout);
    return 0;
  }
  const auto name = args.get("--config");
  if (!name) {
    for (const std::string& shape : known_shape_names()) std::cout << shape << "\n";
    return 0;
  }
  nlohmann::json config = known_shape_config(*name);
  config["lmx_random_weights"] = {{"seed", 1234}};
  std::cout << config.dump(2) << "\n";
  return 0;
}

}  // namespace lmx::cli
