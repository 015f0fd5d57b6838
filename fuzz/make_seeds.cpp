// Writes the seed corpora the models give (scripts/fuzz.sh runs it): each ONNX file that fits
// the fuzz targets' size cap is an onnx seed, and the optimized graph of each one Kiln imports,
// serialized, is a weights seed, as `kiln compile` would write it; so is the (small) reference
// example, of which fuzz/seeds/weights/ holds a copy.
//   kiln_fuzz_seeds OUTDIR MODEL.onnx...   (writes OUTDIR/onnx/ and OUTDIR/weights/)
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz/fuzz_input.h"
#include "graph/example.h"
#include "graph/file_io.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes/pipeline.h"
#include "graph/serialize.h"

namespace {

using namespace kiln;
namespace fs = std::filesystem;

// "…/data/node/test_conv/model.onnx" -> "test_conv", "…/resnet18.onnx" -> "resnet18".
std::string seed_name(const fs::path& p) {
  return p.stem() == "model" ? p.parent_path().filename().string() : p.stem().string();
}

bool write_seed(const fs::path& path, const std::string& bytes) {
  if (bytes.size() > fuzz::kMaxInputBytes) return false;
  graph::write_file_atomically(path.string(), bytes);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kiln_fuzz_seeds OUTDIR MODEL.onnx...\n");
    return 2;
  }
  const fs::path out = argv[1];
  fs::create_directories(out / "onnx");
  fs::create_directories(out / "weights");
  int onnx = 0, weights = 0;
  graph::ExampleShape small;
  small.c = 3, small.h = 9, small.w = 7, small.co = 5;
  const graph::Graph example = graph::reference_example(small);
  weights += write_seed(out / "weights" / "reference_example", graph::serialize(graph::run_passes(example)));
  for (int i = 2; i < argc; ++i) {
    const std::string name = seed_name(argv[i]);
    try {
      const std::string bytes = graph::onnx::read_model_file(argv[i]);
      onnx += write_seed(out / "onnx" / name, bytes);
      const graph::Graph g = graph::run_passes(graph::onnx::import_model_from_bytes(bytes));
      weights += write_seed(out / "weights" / name, graph::serialize(g));
    } catch (const graph::Error&) {
      // Not importable (an op Kiln does not support, weights as graph inputs): still an onnx seed.
    }
  }
  std::printf("[seeds] %d onnx and %d weights seeds in %s\n", onnx, weights, out.c_str());
  return 0;
}
