// `kiln example`: compiles and runs the built-in reference model (Conv + BatchNorm + ReLU) and
// reports every decision the compiler made.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli.h"
#include "commands.h"
#include "graph/builder.h"
#include "graph/example.h"
#include "graph/kernel_spec.h"
#include "graph/memory_plan.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"

namespace kiln::cli {
namespace {

constexpr const char* kHelp = R"(usage: kiln example [options]

Compiles and runs the built-in reference model: NCHW input [N, C, H, W] -> Conv2d (3x3,
stride 2, padding 1) -> BatchNorm -> ReLU. Prints the graph before and after the passes, each
kernel's task description, the memory plan, the error against the unfused reference
interpreter, and the time per run.

options:
  --shape N,C,H,W,Co      input and output-channel sizes (default 1,64,56,56,64)
  --backend cpu|cuda|opencl
                          where the kernels run (default cpu); opencl runs the GPU schedules
                          through OpenCL (e.g. pocl on the CPU), to check them without a GPU
  --fallback              with a GPU backend: use the CPU if no GPU or driver is usable
  --schedule tuned|naive  CPU schedule of the dense convolutions (default tuned)
  --threads N             worker threads (default: one per core)
  --iterations N          timed runs after one warm-up (default 50)
  --dump-after PASS       print the graph after PASS too (a pass name, or "all")
  --seed N                seed of the random weights and input (default 1)
  -h, --help              this text
)";

struct ExampleArgs {
  graph::ExampleShape shape;
  ModelOptions model;
  int iterations = 50;
  std::string dump_after;
  uint64_t seed = 1;
};

ExampleArgs parse(const Args& args) {
  ExampleArgs a;
  if (args.has("--shape")) {
    const std::string v = args.get("--shape");
    std::vector<int64_t> d;
    size_t pos = 0;
    for (;;) {
      const size_t comma = v.find(',', pos);
      d.push_back(parse_int("--shape", v.substr(pos, comma - pos), 1, 1 << 20));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    if (d.size() != 5) throw UsageError("--shape expects N,C,H,W,Co, got '" + v + "'");
    a.shape.n = d[0], a.shape.c = d[1], a.shape.h = d[2], a.shape.w = d[3], a.shape.co = d[4];
  }
  a.model.backend = parse_backend_name("--backend", args.get("--backend", "cpu"));
  a.model.fallback_to_cpu = args.has("--fallback");
  const std::string schedule = args.get("--schedule", "tuned");
  if (schedule != "tuned" && schedule != "naive")
    throw UsageError("--schedule expects tuned or naive, got '" + schedule + "'");
  a.model.schedule = schedule == "tuned" ? Schedule::tuned : Schedule::naive;
  a.model.threads = args.get_int("--threads", 0, 1, 1024);
  a.iterations = args.get_int("--iterations", 50, 1, 1000000);
  a.seed = static_cast<uint64_t>(args.get_int("--seed", 1, 0, 1 << 30));
  a.dump_after = args.get("--dump-after");
  if (!a.dump_after.empty() && a.dump_after != "all") {
    bool known = false;
    for (const graph::Pass& p : graph::default_passes()) known |= a.dump_after == p.name;
    if (!known) throw UsageError("--dump-after: unknown pass '" + a.dump_after + "'");
  }
  if (!args.positionals().empty()) throw UsageError("unexpected argument '" + args.positionals()[0] + "'");
  return a;
}

int run_example(const ExampleArgs& a) {
  using namespace graph;
  const Graph input = reference_example(a.shape, a.seed);
  std::cout << "== input graph ==\n" << dump(input);

  PipelineOptions popts;
  popts.verify_each = true;
  popts.on_stage = [&](const std::string& stage, const Graph& g) {
    if (stage == "input") return;
    std::cout << "pass " << stage << ": " << g.num_nodes() << " nodes\n";
    if (a.dump_after == "all" || a.dump_after == stage) std::cout << dump(g);
  };
  const Graph optimized = run_passes(input, popts);
  std::cout << "\n== optimized graph ==\n" << dump(optimized);

  ModelOptions mopts = a.model;
  mopts.profile = true;
  mopts.generate_kernels = kernel_generator();
  Model model(optimized, mopts);
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

  std::cout << "== run ==\nbackend: " << to_string(model.backend());
  if (!model.fallback_reason().empty()) std::cout << " (fell back: " << model.fallback_reason() << ")";
  if (model.backend() == Backend::cpu)
    std::cout << ", schedule: " << to_string(a.model.schedule)
              << ", target: " << model.cpu_target();
  std::cout << "\n";

  const std::vector<Tensor> inputs = {x};  // built once: the timed loop must not copy it
  const Status first = model.run(inputs);
  if (!first) {
    std::fprintf(stderr, "kiln: %s\n", first.message().c_str());
    return 1;
  }
  const TensorView out = model.output(0);
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
    const Status s = model.run(inputs);
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
  bool winograd = false;
  for (size_t k = 0; k < kernel_ms.size(); ++k) {
    std::sort(kernel_ms[k].begin(), kernel_ms[k].end());
    std::cout << "  kernel " << k << " ("
              << std::visit([](const auto& s) { return s.name; }, model.kernels()[k])
              << "): median " << kernel_ms[k][kernel_ms[k].size() / 2] << " ms";
    // The convolution's algorithm where it is not the direct one (docs/design.md, "Winograd").
    if (const int t = model.winograd_tile(k)) {
      std::cout << ", winograd F(" << t << "x" << t << ")";
      winograd = true;
    }
    std::cout << "\n";
  }
  std::cout << "time per run: median " << median << " ms, min " << ms.front() << " ms over "
            << a.iterations << " runs (" << flops / (median * 1e6) << " GFLOP/s"
            << (winograd ? ", counting the direct convolution's flops" : "") << ")\n";
  return ratio <= 1.0 ? 0 : 1;
}

}  // namespace

int cmd_example(int argc, char** argv) {
  const Args args(argc, argv, 2,
                  {"--shape", "--backend", "--schedule", "--threads", "--iterations",
                   "--dump-after", "--seed"},
                  {"--fallback"});
  if (args.help()) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  return run_example(parse(args));
}

}  // namespace kiln::cli
