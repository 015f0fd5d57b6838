// Compiling generated kernels ahead of time, and the shared-object cache the `kiln` tool and
// the tests load them from.
#include "codegen/kernel_library.h"
#include "codegen/file_cache.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include "Halide.h"
#include "codegen/kernel_pipeline.h"
#include "codegen/pipeline_parts.h"
#include "codegen/process.h"
#include "codegen_config.h"
#include "graph/file_io.h"
#include "runtime/kernels.h"
#include "schedules/conv_params.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

Halide::Target parse_target(const std::string& name) {
  if (!Halide::Target::validate_target_string(name))
    throw graph::Error("'" + name + "' is not a Halide target");
  // Every kernel shares the one Halide runtime the program links (runtime/, generators/).
  return Halide::Target(name).with_feature(Halide::Target::NoRuntime);
}

// Which kernels of a bf16 convolution are compiled: for a library that may run on any CPU
// (`kiln compile`, several targets), all of them: the AVX512_BF16 variant of each AVX-512
// target, the target itself and the AMX kernel. For the kernels of one target compiled on the
// machine that runs them (`kiln run`, `bench`, the tests), only those this CPU runs.
struct Bf16Kernels {
  bool variant = true, base = true, amx = true;
};
Bf16Kernels bf16_kernels_for(const std::vector<std::string>& targets, bool this_cpu) {
  if (!this_cpu || targets.size() != 1 || runtime::bf16_target(targets[0]).empty()) return {};
  const bool variant = runtime::target_supported(runtime::bf16_target(targets[0]));
  return {variant, !variant, variant && runtime::amx_usable()};
}

// The targets the kernel of `spec` is compiled for, best first, with the schedule text of each:
// `targets` with library_schedules' texts, and for a bf16 convolution, before each AVX-512
// target, its AVX512_BF16 variant (runtime::bf16_target) with that target's schedule (of the
// two, those `bf16` asks for).
struct KernelTargets {
  std::vector<std::string> names, schedules;
};
KernelTargets kernel_targets(const graph::KernelSpec& spec, const std::vector<std::string>& targets,
                             const ScheduleLookup& schedules, const Bf16Kernels& bf16) {
  const std::vector<std::string> texts = library_schedules(spec, targets, schedules);
  const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec);
  KernelTargets out;
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string variant = conv && conv->bf16 ? runtime::bf16_target(targets[i]) : "";
    if (!variant.empty() && bf16.variant) out.names.push_back(variant), out.schedules.push_back(texts[i]);
    if (variant.empty() || bf16.base) out.names.push_back(targets[i]), out.schedules.push_back(texts[i]);
  }
  return out;
}

// The target of `spec`'s AMX kernel (GeneratedKernel::amx_fn) among `targets`, or "" when it has
// none: a bf16 convolution without a schedule of its own that the amx schedule takes and that
// is not one of the shapes it is slow on (schedules::amx_by_default), compiled
// for an AVX-512 target (runtime::amx_target: its AVX512_BF16 variant with Sapphire Rapids'
// level, which holds AMX in Halide's feature levels).
std::string amx_target(const graph::KernelSpec& spec, const std::vector<std::string>& targets,
                       const Bf16Kernels& bf16 = {}) {
  const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec);
  if (!bf16.amx || !conv || !conv->bf16 || !conv->schedule.empty()) return "";
  for (const std::string& t : targets) {
    const std::string variant = runtime::amx_target(t);
    if (variant.empty()) continue;
    const Halide::Target target(variant);
    const schedules::ConvShape shape = conv_shape(*conv, target);
    return schedules::amx_by_default(shape) &&
                   schedules::conv_params_error(schedules::default_amx_params(shape), shape, target)
                       .empty()
               ? variant
               : "";
  }
  return "";
}

// The symbol of an AMX kernel's entry point: entry_point's with "_amx" before "_argv".
std::string amx_entry_point(const std::string& prefix, size_t index) {
  return prefix + "_k" + std::to_string(index) + "_amx_argv";
}

// Whether kernels get their half-width kernel (GeneratedKernel::half_fn) where they have one:
// in a library for any CPU unless `half_width` is never; compiled for this CPU, where its
// Model calls them (Model's uses_half_width: always, or where the CPU splits 512-bit
// multiply-adds).
bool half_kernels_for(bool this_cpu, HalfWidth half_width) {
  if (half_width == HalfWidth::never) return false;
  return !this_cpu || half_width == HalfWidth::always || runtime::splits_512bit_fma();
}

// `spec`'s half-width kernel among `targets` (half_width_kernel) where `wanted`, else none.
HalfWidthKernel half_kernel(const graph::KernelSpec& spec, const std::vector<std::string>& targets,
                            const ScheduleLookup& schedules, bool wanted = true) {
  return wanted ? half_width_kernel(spec, targets, schedules) : HalfWidthKernel{};
}

// The symbol of a half-width kernel's entry point: entry_point's with "_half" before "_argv".
std::string half_entry_point(const std::string& prefix, size_t index) {
  return prefix + "_k" + std::to_string(index) + "_half_argv";
}

void compile_kernel(const graph::KernelSpec& spec, const std::vector<std::string>& requested,
                    const std::string& fn_name, const fs::path& archive,
                    const ScheduleLookup& schedules, const Bf16Kernels& bf16 = {}) {
  std::vector<Halide::Target> targets;
  std::vector<std::string> suffixes;
  std::map<std::string, std::string> schedule_of;  // by the parsed target's string
  const KernelTargets kt = kernel_targets(spec, requested, schedules, bf16);
  const std::vector<std::string>& target_names = kt.names;
  const std::vector<std::string>& texts = kt.schedules;
  for (size_t i = 0; i < target_names.size(); ++i) {
    targets.push_back(parse_target(target_names[i]));
    suffixes.push_back(targets.back().to_string());
    schedule_of[suffixes.back()] = texts[i];
  }
  const auto module_for = [&](const std::string& name, const Halide::Target& t) {
    KernelPipeline k = build_kernel_pipeline(spec, t, schedule_of.at(t.to_string()));
    return k.pipeline.compile_to_module(k.arguments(), name, t);
  };
  try {
    Halide::compile_multitarget(
        fn_name, {{Halide::OutputFileType::static_library, archive.string()}}, targets,
        targets.size() > 1 ? suffixes : std::vector<std::string>{}, module_for);
  } catch (const Halide::CompileError& e) {
    throw graph::Error("generating kernel '" + graph::kernel_name(spec) + "' failed: " + e.what());
  } catch (const Halide::InternalError& e) {
    throw std::logic_error("internal error generating kernel '" + graph::kernel_name(spec) +
                           "': " + e.what());
  }
}

std::string cpp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> default_targets() {
  const int best = runtime::best_cpu_target();
  if (best < 0) throw graph::Error("this CPU supports none of Kiln's CPU targets");
  return {runtime::cpu_targets()[static_cast<size_t>(best)]};
}

// GPU kernels through OpenCL (Backend::opencl): baseline x86-64 host code.
constexpr const char* kOpenClTarget = "x86-64-linux-opencl";

// What a compiled kernel depends on besides its spec: the toolchain, the targets and which
// bf16 kernels they get.
std::string toolchain_key(const std::vector<std::string>& targets, const Bf16Kernels& bf16) {
  std::string key = toolchain_identity() + "targets";
  for (const std::string& t : targets) key += " " + t;
  return key + "\nbf16 kernels: " + std::string(bf16.variant ? "variant " : "") +
         (bf16.base ? "base " : "") + (bf16.amx ? "amx" : "") + "\n";
}

// A distinct kernel's part of a cache key: its signature and the schedule it gets on each
// target, resolved (so a changed database record or default changes the key), and its
// half-width kernel's where it gets one.
std::string kernel_key(const graph::KernelSpec& spec, const std::vector<std::string>& targets,
                       const ScheduleLookup& schedules, bool half_wanted) {
  std::string key = graph::kernel_signature(spec) + "\n";
  const std::vector<std::string> texts = library_schedules(spec, targets, schedules);
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string schedule = resolve_schedule(spec, parse_target(targets[i]), texts[i]);
    if (!schedule.empty()) key += "  schedule " + targets[i] + ": " + schedule + "\n";
  }
  const HalfWidthKernel half = half_kernel(spec, targets, schedules, half_wanted);
  if (!half.target.empty()) key += "  half-width " + half.target + ": " + half.schedule + "\n";
  return key;
}

// Compiles the kernels into DIR/kernels.so.
void build_shared_object(const std::vector<graph::KernelSpec>& specs, const CodegenOptions& o,
                         const std::vector<std::string>& targets, bool this_cpu,
                         HalfWidth half_width, const fs::path& dir) {
  const std::vector<fs::path> archives = write_kernel_archives(
      specs, targets, "kiln", dir, o.progress, o.schedules, this_cpu, o.cache_dir, half_width);
  std::vector<std::string> link = {config::kCxxCompiler, "-shared", "-o",
                                   (dir / "kernels.so").string(), "-Wl,--whole-archive"};
  for (const fs::path& a : archives) link.push_back(a.string());
  link.push_back("-Wl,--no-whole-archive");
  run_tool(link, "linking the generated kernels");
  for (const fs::path& a : archives) fs::remove(a);
}

std::shared_ptr<const GeneratedKernels> load(const fs::path& so,
                                             const std::vector<graph::KernelSpec>& specs,
                                             const std::vector<std::string>& targets,
                                             const ScheduleLookup& schedules, bool this_cpu,
                                             HalfWidth half_width) {
  const Bf16Kernels bf16 = bf16_kernels_for(targets, this_cpu);
  const bool half = half_kernels_for(this_cpu, half_width);
  void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw graph::Error("cannot load the generated kernels " + so.string() + ": " + dlerror());
  // The signatures (and the half-width kernels' targets) must live as long as the table; the
  // specs they come from may not.
  auto signatures = std::make_shared<std::vector<std::string>>();
  auto half_targets = std::make_shared<std::vector<std::string>>();
  for (const graph::KernelSpec& s : specs) {
    signatures->push_back(graph::kernel_signature(s));
    half_targets->push_back(half_kernel(s, targets, schedules, half).target);
  }
  auto kernels = std::make_shared<GeneratedKernels>();
  kernels->owner =
      std::shared_ptr<void>(handle, [signatures, half_targets](void* h) { dlclose(h); });
  const DistinctKernels d = distinct_kernels(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string symbol = entry_point("kiln", d.kernel_of[i]);
    void* fn = dlsym(handle, symbol.c_str());
    if (!fn) throw graph::Error("the generated kernels " + so.string() + " lack " + symbol);
    void* amx = nullptr;
    if (!amx_target(specs[i], targets, bf16).empty()) {
      const std::string amx_symbol = amx_entry_point("kiln", d.kernel_of[i]);
      amx = dlsym(handle, amx_symbol.c_str());
      if (!amx) throw graph::Error("the generated kernels " + so.string() + " lack " + amx_symbol);
    }
    void* half_fn = nullptr;
    const std::string& half_target = (*half_targets)[i];
    if (!half_target.empty()) {
      const std::string half_symbol = half_entry_point("kiln", d.kernel_of[i]);
      half_fn = dlsym(handle, half_symbol.c_str());
      if (!half_fn)
        throw graph::Error("the generated kernels " + so.string() + " lack " + half_symbol);
    }
    kernels->kernels.push_back({(*signatures)[i].c_str(), reinterpret_cast<GeneratedKernelFn>(fn),
                                library_weight_tile(specs[i], targets, schedules),
                                reinterpret_cast<GeneratedKernelFn>(amx),
                                reinterpret_cast<GeneratedKernelFn>(half_fn),
                                half_target.empty() ? nullptr : half_target.c_str()});
  }
  return kernels;
}

}  // namespace

std::string generator_identity() {
  static const std::string id = [] {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx",
                  static_cast<unsigned long long>(graph::fnv1a(read_text("/proc/self/exe"))));
    return std::string(buf);
  }();
  return id;
}

std::string entry_point(const std::string& prefix, size_t index) {
  return prefix + "_k" + std::to_string(index) + "_argv";
}

DistinctKernels distinct_kernels(const std::vector<graph::KernelSpec>& specs) {
  DistinctKernels d;
  std::map<std::string, size_t> seen;
  for (const graph::KernelSpec& s : specs) {
    const auto [it, added] = seen.emplace(graph::kernel_signature(s), d.kernels.size());
    if (added) d.kernels.push_back(s);
    d.kernel_of.push_back(it->second);
  }
  return d;
}

std::string requested_schedule(const graph::KernelSpec& spec, const std::string& target,
                               const ScheduleLookup& schedules) {
  if (const auto* c = std::get_if<graph::ConvKernelSpec>(&spec))
    if (!c->schedule.empty()) return c->schedule;
  return schedules ? schedules(spec, target) : "";
}

std::vector<std::string> library_schedules(const graph::KernelSpec& spec,
                                           const std::vector<std::string>& targets,
                                           const ScheduleLookup& schedules) {
  std::vector<std::string> out;
  for (const std::string& t : targets) out.push_back(requested_schedule(spec, t, schedules));
  if (targets.size() < 2) return out;
  const int tile = winograd_weight_tile(spec, parse_target(targets[0]), out[0]);
  for (size_t i = 1; i < targets.size(); ++i)
    out[i] = schedule_for_weight_tile(spec, parse_target(targets[i]), out[i], tile);
  return out;
}

int library_weight_tile(const graph::KernelSpec& spec, const std::vector<std::string>& targets,
                        const ScheduleLookup& schedules) {
  if (targets.empty()) return 0;
  return winograd_weight_tile(spec, parse_target(targets[0]),
                              requested_schedule(spec, targets[0], schedules));
}

HalfWidthKernel half_width_kernel(const graph::KernelSpec& spec,
                                  const std::vector<std::string>& targets,
                                  const ScheduleLookup& schedules) {
  for (const std::string& name : targets) {
    const Halide::Target t = parse_target(name);
    if (t.has_gpu_feature() || t.natural_vector_size<float>() != 16) continue;
    if (!requested_schedule(spec, name, schedules).empty()) return {};
    const std::string half = half_width_schedule(spec, t);
    if (half.empty() ||
        winograd_weight_tile(spec, t, half) != library_weight_tile(spec, targets, schedules))
      return {};
    return {name, half};
  }
  return {};
}

std::vector<fs::path> write_kernel_archives(const std::vector<graph::KernelSpec>& specs,
                                            const std::vector<std::string>& targets,
                                            const std::string& prefix, const fs::path& dir,
                                            const Progress& progress,
                                            const ScheduleLookup& schedules, bool this_cpu,
                                            const std::string& cache_dir, HalfWidth half_width) {
  const Bf16Kernels bf16 = bf16_kernels_for(targets, this_cpu);
  const bool half_wanted = half_kernels_for(this_cpu, half_width);
  if (targets.empty()) throw graph::Error("no target to generate kernels for");
  for (const std::string& t : targets) parse_target(t);  // every name checked before compiling
  const std::vector<graph::KernelSpec> kernels = distinct_kernels(specs).kernels;
  const FileCache cache(cache_dir, "archives");
  const std::string toolchain = cache_dir.empty() ? "" : toolchain_key(targets, bf16);
  std::vector<fs::path> archives;
  for (size_t u = 0; u < kernels.size(); ++u) {
    const std::string fn = prefix + "_k" + std::to_string(u);
    const std::string amx = amx_target(kernels[u], targets, bf16);
    const HalfWidthKernel half = half_kernel(kernels[u], targets, schedules, half_wanted);
    std::vector<std::string> names = {fn + ".a"};
    if (!amx.empty()) names.push_back(fn + "_amx.a");
    if (!half.target.empty()) names.push_back(fn + "_half.a");
    for (const std::string& n : names) archives.push_back(dir / n);
    // The entry point's name is part of the key: the archive defines it.
    const std::string key = cache_dir.empty()
                                ? ""
                                : toolchain + "entry " + fn + "\n" +
                                      kernel_key(kernels[u], targets, schedules, half_wanted);
    if (cache.fetch(key, dir, names)) {
      if (progress) progress(u, kernels.size(), graph::kernel_name(kernels[u]), true);
      continue;
    }
    if (progress) progress(u, kernels.size(), graph::kernel_name(kernels[u]), false);
    compile_kernel(kernels[u], targets, fn, dir / names[0], schedules, bf16);
    if (!amx.empty())
      compile_kernel(kernels[u], {amx}, fn + "_amx", dir / names[1],
                     [](const graph::KernelSpec&, const std::string&) { return "amx"; });
    if (!half.target.empty())
      compile_kernel(
          kernels[u], {half.target}, fn + "_half", dir / names.back(),
          [&half](const graph::KernelSpec&, const std::string&) { return half.schedule; });
    cache.store(key, dir, names);
  }
  return archives;
}

int write_kernel_listings(const std::vector<graph::KernelSpec>& all_specs,
                          const std::vector<std::string>& targets, const std::string& prefix,
                          const std::string& kind, const fs::path& dir, const Progress& progress,
                          const ScheduleLookup& schedules) {
  const std::vector<graph::KernelSpec> specs = distinct_kernels(all_specs).kernels;
  const bool assembly = kind == "assembly";
  KILN_CHECK(assembly || kind == "stmt", "unknown listing kind " + kind);
  fs::create_directories(dir);
  int written = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (progress) progress(i, specs.size(), graph::kernel_name(specs[i]), false);
    KernelTargets kt = kernel_targets(specs[i], targets, schedules, {});
    const std::string amx = amx_target(specs[i], targets);
    if (!amx.empty()) kt.names.push_back(amx), kt.schedules.push_back("amx");
    const size_t main_kernels = kt.names.size();
    const HalfWidthKernel half = half_kernel(specs[i], targets, schedules);
    if (!half.target.empty())
      kt.names.push_back(half.target), kt.schedules.push_back(half.schedule);
    const std::vector<std::string>& texts = kt.schedules;
    for (size_t ti = 0; ti < kt.names.size(); ++ti) {
      const std::string& name = kt.names[ti];
      const Halide::Target t = parse_target(name);
      const bool amx_kernel = texts[ti] == "amx";
      const std::string fn = prefix + "_k" + std::to_string(i) +
                             (amx_kernel           ? "_amx"
                              : ti >= main_kernels ? "_half"
                                                   : "");
      const fs::path file = dir / (fn + "-" + name + (assembly ? ".s" : ".stmt"));
      try {
        KernelPipeline k = build_kernel_pipeline(specs[i], t, texts[ti]);
        k.pipeline.compile_to_module(k.arguments(), fn, t)
            .compile({{assembly ? Halide::OutputFileType::assembly : Halide::OutputFileType::stmt,
                       file.string()}});
      } catch (const Halide::CompileError& e) {
        throw graph::Error("listing kernel '" + graph::kernel_name(specs[i]) +
                           "' failed: " + e.what());
      }
      ++written;
    }
  }
  return written;
}

std::string kernel_table_source(const std::vector<graph::KernelSpec>& specs,
                                const std::string& prefix,
                                const std::vector<std::string>& targets,
                                const ScheduleLookup& schedules) {
  const DistinctKernels d = distinct_kernels(specs);
  std::ostringstream s;
  s << "// Generated by Kiln's codegen: the entry points of this model's generated kernels. Do not "
       "edit.\n#include <cstddef>\n\n#include \"kiln/generated_kernels.h\"\n\nextern \"C\" {\n";
  for (size_t u = 0; u < d.kernels.size(); ++u) {
    s << "int " << entry_point(prefix, u) << "(void**);\n";
    if (!amx_target(d.kernels[u], targets).empty())
      s << "int " << amx_entry_point(prefix, u) << "(void**);\n";
    if (!half_kernel(d.kernels[u], targets, schedules).target.empty())
      s << "int " << half_entry_point(prefix, u) << "(void**);\n";
  }
  // Named after the prefix: a model's CPU and CUDA tables share one source file.
  const std::string table = "k_" + prefix + "_table";
  s << "}\n\nnamespace {\n";
  if (!specs.empty()) {
    s << "const kiln::GeneratedKernel " << table << "[] = {\n";
    for (size_t i = 0; i < specs.size(); ++i) {
      const HalfWidthKernel half = half_kernel(specs[i], targets, schedules);
      s << "    {" << cpp_string(graph::kernel_signature(specs[i])) << ", "
        << entry_point(prefix, d.kernel_of[i]) << ", "
        << library_weight_tile(specs[i], targets, schedules) << ", "
        << (amx_target(specs[i], targets).empty() ? "nullptr"
                                                  : amx_entry_point(prefix, d.kernel_of[i]))
        << ", "
        << (half.target.empty()
                ? "nullptr, nullptr"
                : half_entry_point(prefix, d.kernel_of[i]) + ", " + cpp_string(half.target))
        << "},  // " << graph::kernel_name(specs[i]).substr(0, 60) << "\n";
    }
    s << "};\n";
  }
  s << "}  // namespace\n\nextern \"C\" const kiln::GeneratedKernel* " << prefix
    << "_kernel_table(std::size_t* count) {\n  *count = " << specs.size() << ";\n  return "
    << (specs.empty() ? "nullptr" : table) << ";\n}\n";
  return s.str();
}

std::vector<std::string> request_targets(const KernelRequest& request,
                                         const CodegenOptions& options) {
  switch (request.backend) {
    case Backend::cuda: return {runtime::cuda_target()};
    case Backend::opencl: return {kOpenClTarget};
    case Backend::cpu: break;
  }
  if (!request.cpu_target.empty()) return {request.cpu_target};
  return options.targets.empty() ? default_targets() : options.targets;
}

KernelGenerator kernel_generator(const CodegenOptions& options) {
  return [options](const std::vector<graph::KernelSpec>& specs, const KernelRequest& request)
             -> std::shared_ptr<const GeneratedKernels> {
    const std::vector<std::string> targets = request_targets(request, options);
    // One target, compiled on the machine that runs it: a bf16 convolution gets only the
    // kernels this CPU runs (not the variants a library for any CPU holds).
    const bool this_cpu = request.backend == Backend::cpu &&
                          (!request.cpu_target.empty() || options.targets.empty());
    std::string key = toolchain_key(targets, bf16_kernels_for(targets, this_cpu));
    const bool half = half_kernels_for(this_cpu, request.half_width);
    for (const graph::KernelSpec& s : distinct_kernels(specs).kernels)
      key += kernel_key(s, targets, options.schedules, half);

    std::error_code ec;
    // Without a usable cache: compiled in a temporary directory, loaded, removed (the loaded
    // mapping outlives the file).
    auto uncached = [&]() -> std::shared_ptr<const GeneratedKernels> {
      const fs::path tmp = unique_dir(fs::temp_directory_path(), "kiln-kernels");
      try {
        build_shared_object(specs, options, targets, this_cpu, request.half_width, tmp);
        auto k = load(tmp / "kernels.so", specs, targets, options.schedules, this_cpu,
                      request.half_width);
        fs::remove_all(tmp, ec);
        return k;
      } catch (...) {
        fs::remove_all(tmp, ec);
        throw;
      }
    };
    if (options.cache_dir.empty()) return uncached();
    // The hash names the entry; the full key stored in it decides whether it is used.
    char name[32];
    std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(graph::fnv1a(key)));
    const fs::path root = fs::path(options.cache_dir) / "kernels";
    const fs::path entry = root / name;
    if (read_text(entry / "key.txt") == key && fs::exists(entry / "kernels.so", ec)) {
      try {
        return load(entry / "kernels.so", specs, targets, options.schedules, this_cpu,
                    request.half_width);
      } catch (const graph::Error&) {
        // A damaged entry: compile again below and replace it.
      }
    }
    // A cache directory that cannot be written (read-only, full) costs a compile, not an error,
    // as for the graph cache.
    fs::create_directories(root, ec);
    if (ec || access(root.c_str(), W_OK) != 0) return uncached();
    const fs::path tmp = unique_dir(root, std::string(name) + ".tmp");
    try {
      build_shared_object(specs, options, targets, this_cpu, request.half_width, tmp);
      std::ofstream(tmp / "key.txt", std::ios::binary) << key;
      fs::remove_all(entry, ec);
      fs::rename(tmp, entry, ec);  // fails if another process got there first: keep theirs,
      if (ec) {                    // load this build from where it is
        auto k = load(tmp / "kernels.so", specs, targets, options.schedules, this_cpu,
                      request.half_width);
        fs::remove_all(tmp, ec);
        return k;
      }
      return load(entry / "kernels.so", specs, targets, options.schedules, this_cpu,
                  request.half_width);
    } catch (...) {
      fs::remove_all(tmp, ec);
      throw;
    }
  };
}

}  // namespace kiln::codegen
