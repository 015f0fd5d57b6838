// The kiln command. Subcommands: `example` compiles and runs the built-in reference model
// (Conv + BatchNorm + ReLU) and reports every decision the compiler made.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "graph/builder.h"
#include "graph/example.h"
#include "graph/kernel_spec.h"
#include "graph/memory_plan.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"

namespace {

constexpr const char* kUsage = R"(usage: kiln <command> [options]

commands:
  example     compile and run the built-in reference model: NCHW input [N, C, H, W] ->
              Conv2d (3x3, stride 2, padding 1) -> BatchNorm -> ReLU. Prints the graph
              before and after the passes, each kernel's task description, the memory plan,
              the error against the unfused reference interpreter, and the time per run.

options for example:
  --shape N,C,H,W,Co    input and output-channel sizes (default 1,64,56,56,64)
  --backend cpu|cuda    where the kernels run (default cpu)
  --fallback            with --backend cuda: use the CPU if no GPU or driver is usable
  --schedule tuned|naive  CPU schedule (default tuned)
  --threads N           worker threads (default: one per core)
  --iterations N        timed runs after one warm-up (default 50)
  --dump-after PASS     print the graph after PASS too (a pass name, or "all")
  --seed N              seed of the random weights and input (default 1)
  -h, --help            this text
)";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "kiln: %s\n(run 'kiln --help' for usage)\n", msg.c_str());
  std::exit(2);
}

int parse_int(const std::string& flag, const std::string& s, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi)
    usage_error(flag + " expects an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "], got '" + s + "'");
  return static_cast<int>(v);
}

struct ExampleArgs {
  kiln::graph::ExampleShape shape;
  kiln::ModelOptions model;
  int iterations = 50;
  std::string dump_after;
  uint64_t seed = 1;
};

ExampleArgs parse_example(int argc, char** argv) {
  ExampleArgs a;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--shape") {
      const std::string v = value();
      int64_t d[5];
      int k = 0;
      size_t pos = 0;
      while (k < 5) {
        const size_t comma = v.find(',', pos);
        d[k++] = parse_int("--shape", v.substr(pos, comma - pos), 1, 1 << 20);
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
      if (k != 5 || v.find(',', pos) != std::string::npos)
        usage_error("--shape expects N,C,H,W,Co, got '" + v + "'");
      a.shape.n = d[0], a.shape.c = d[1], a.shape.h = d[2], a.shape.w = d[3], a.shape.co = d[4];
    } else if (arg == "--backend") {
      const std::string v = value();
      if (v != "cpu" && v != "cuda") usage_error("--backend expects cpu or cuda, got '" + v + "'");
      a.model.backend = v == "cpu" ? kiln::Backend::cpu : kiln::Backend::cuda;
    } else if (arg == "--fallback") {
      a.model.fallback_to_cpu = true;
    } else if (arg == "--schedule") {
      const std::string v = value();
      if (v != "tuned" && v != "naive") usage_error("--schedule expects tuned or naive, got '" + v + "'");
      a.model.schedule = v == "tuned" ? kiln::Schedule::tuned : kiln::Schedule::naive;
    } else if (arg == "--threads") {
      a.model.threads = parse_int(arg, value(), 1, 1024);
    } else if (arg == "--iterations") {
      a.iterations = parse_int(arg, value(), 1, 1000000);
    } else if (arg == "--dump-after") {
      a.dump_after = value();
    } else if (arg == "--seed") {
      a.seed = static_cast<uint64_t>(parse_int(arg, value(), 0, 1 << 30));
    } else {
      usage_error("unknown option '" + arg + "'");
    }
  }
  return a;
}

int run_example(const ExampleArgs& a) {
  using namespace kiln::graph;
  const Graph input = reference_example(a.shape, a.seed);
  std::cout << "== input graph ==\n" << dump(input);

  PipelineOptions popts;
  popts.verify_each = true;
  popts.on_stage = [&](const std::string& stage, const Graph& g) {
    if (stage == "input") return;
    std::cout << "pass " << stage << ": " << g.num_nodes() << " nodes\n";
    if (a.dump_after == "all" || a.dump_after == stage) std::cout << dump(g);
  };
  if (!a.dump_after.empty() && a.dump_after != "all") {
    bool known = false;
    for (const Pass& p : default_passes()) known |= a.dump_after == p.name;
    if (!known) usage_error("--dump-after: unknown pass '" + a.dump_after + "'");
  }
  const Graph optimized = run_passes(input, popts);
  std::cout << "\n== optimized graph ==\n" << dump(optimized);

  kiln::ModelOptions mopts = a.model;
  mopts.profile = true;
  kiln::Model model(optimized, mopts);
  std::cout << "\n== kernels (" << model.kernels().size() << ") ==\n";
  for (const KernelSpec& k : model.kernels()) std::cout << describe(k) << "\n";

  const ArenaPlan& plan = model.arena_plan();
  std::cout << "== memory plan ==\n" << describe(plan, optimized);
  // Naive: an engine without fusion or reuse gives every tensor the input graph computes its own
  // buffer. The planned arena also holds the NHWC copies of NCHW inputs, which the input graph
  // does not have: shown apart so that neither number hides the other.
  std::string computed;
  for (const Node& n : input.nodes()) computed += (computed.empty() ? "" : ", ") + input.value(n.outputs[0]).name;
  int64_t layout_copies = 0;
  for (const ArenaBuffer& b : plan.buffers)
    if (std::holds_alternative<LayoutTransform>(optimized.node(optimized.value(b.value).producer).op))
      layout_copies += b.bytes;
  std::cout << "  naive, each tensor of the input graph in its own buffer (" << computed
            << "): " << naive_activation_bytes(input) << " bytes\n";
  std::cout << "  planned arena: " << plan.arena_bytes << " bytes, of which " << layout_copies
            << " hold the NHWC copy of the input\n\n";
  const Value& in = input.value(input.inputs[0]);
  Tensor x{in.shape, in.layout, random_uniform(num_elements(in.shape), -1.0f, 1.0f, a.seed + 100)};
  const Tensor expected = run_reference(input, {x})[0];

  std::cout << "== run ==\nbackend: " << kiln::to_string(model.backend());
  if (!model.fallback_reason().empty()) std::cout << " (fell back: " << model.fallback_reason() << ")";
  if (model.backend() == kiln::Backend::cpu)
    std::cout << ", schedule: " << kiln::to_string(a.model.schedule)
              << ", target: " << model.cpu_target();
  std::cout << "\n";

  const std::vector<Tensor> inputs = {x};  // built once: the timed loop must not copy it
  const kiln::Status first = model.run(inputs);
  if (!first) {
    std::fprintf(stderr, "kiln: %s\n", first.message().c_str());
    return 1;
  }
  const kiln::TensorView out = model.output(0);
  Tensor got{out.shape, out.layout, std::vector<float>(out.data, out.data + num_elements(out.shape))};
  got = to_layout(got, expected.layout);
  const double max_err = max_abs_diff(got.data, expected.data);
  const double ratio = worst_error_ratio(got.data, expected.data, 1e-4, 1e-5);
  std::cout << "max abs error vs unfused reference: " << max_err
            << (ratio <= 1.0 ? " (within rtol 1e-4, atol 1e-5)" : " (OUT OF TOLERANCE)") << "\n";

  std::vector<double> ms;
  std::vector<std::vector<double>> kernel_ms(model.kernels().size());
  for (int i = 0; i < a.iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const kiln::Status s = model.run(inputs);
    const auto t1 = std::chrono::steady_clock::now();
    if (!s) {
      std::fprintf(stderr, "kiln: %s\n", s.message().c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    for (size_t k = 0; k < kernel_ms.size(); ++k) kernel_ms[k].push_back(model.kernel_seconds()[k] * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  double flops = 0;
  for (const KernelSpec& k : model.kernels())
    if (const auto* c = std::get_if<ConvKernelSpec>(&k))
      flops += 2.0 * num_elements(c->output.shape) * num_elements(c->weights.shape) /
               c->output.shape[3];
  for (size_t k = 0; k < kernel_ms.size(); ++k) {
    std::sort(kernel_ms[k].begin(), kernel_ms[k].end());
    std::cout << "  kernel " << k << " (" << std::visit([](const auto& s) { return s.name; }, model.kernels()[k])
              << "): median " << kernel_ms[k][kernel_ms[k].size() / 2] << " ms\n";
  }
  std::cout << "time per run: median " << median << " ms, min " << ms.front() << " ms over "
            << a.iterations << " runs (" << flops / (median * 1e6) << " GFLOP/s)\n";
  return ratio <= 1.0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage_error("missing command");
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    if (cmd == "example") return run_example(parse_example(argc, argv));
    usage_error("unknown command '" + cmd + "'");
  } catch (const kiln::graph::Error& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 3;
  }
}
