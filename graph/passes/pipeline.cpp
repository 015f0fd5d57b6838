// The pass list and its driver.
#include "graph/passes/pipeline.h"

#include <string>

#include "graph/passes/passes.h"
#include "graph/verify.h"

namespace kiln::graph {

const std::vector<Pass>& default_passes() {
  static const std::vector<Pass> passes = {
      {"fold_constants", fold_constants},
      {"fuse_layer_norm", fuse_layer_norm},
      {"fuse_gelu", fuse_gelu},
      {"split_radix_sums", split_radix_sums},
      {"simplify_exported_ops", simplify_exported_ops},
      {"matmul_to_conv", matmul_to_conv},
      {"hoist_conv3d_epilogue", hoist_conv3d_epilogue},
      {"sink_transposes", sink_transposes},
      {"fold_pad_into_conv", fold_pad_into_conv},
      {"fold_batch_norm", fold_batch_norm},
      {"merge_parallel_convs", merge_parallel_convs},
      {"fuse_epilogues", fuse_epilogues},
      {"split_grouped_convs", split_grouped_convs},
      {"convert_to_nhwc", convert_to_nhwc},
      {"fuse_elementwise_chains", fuse_elementwise_chains},
      {"fuse_norm_epilogues", fuse_norm_epilogues},
      {"fuse_conv_prologues", fuse_conv_prologues},
      {"fuse_conv_shortcut", fuse_conv_shortcut},
      {"fuse_conv_pooling", fuse_conv_pooling},
      {"fuse_expand_depthwise", fuse_expand_depthwise},
      {"fuse_conv_resize", fuse_conv_resize},
      {"fuse_pooling_into_conv", fuse_pooling_into_conv},
  };
  return passes;
}

const char* to_string(Precision p) { return p == Precision::bf16 ? "bf16" : "f32"; }

Precision parse_precision(const std::string& text) {
  if (text == "f32") return Precision::f32;
  if (text == "bf16") return Precision::bf16;
  throw Error("unknown precision '" + text + "' (f32 or bf16)");
}

Graph run_passes(const Graph& input, const PipelineOptions& options) {
  if (!options.stop_after.empty()) {
    bool known = false;
    std::string names;
    for (const Pass& p : default_passes()) {
      known |= options.stop_after == p.name;
      names += std::string(names.empty() ? "" : ", ") + p.name;
    }
    known |= (options.stop_after == "use_bf16" || options.stop_after == "gemm_as_conv") &&
             options.precision == Precision::bf16;
    if (!known) throw Error("unknown pass '" + options.stop_after + "' (passes: " + names + ")");
  }
  // User graphs are always verified: the passes assume a well-formed input.
  verify(input, "given to the pass pipeline");
  if (options.on_stage) options.on_stage("input", input);
  Graph g = input;
  if (options.precision == Precision::bf16) {
    g = gemm_as_conv(g);
    if (options.verify_each) verify(g, "after gemm_as_conv");
    if (options.on_stage) options.on_stage("gemm_as_conv", g);
    if (options.stop_after == "gemm_as_conv") return g;
  }
  for (const Pass& p : default_passes()) {
    // A fused expansion runs in float32; in bf16 mode it runs bf16 on its own.
    const bool bf16_apart =
        options.precision == Precision::bf16 && std::string(p.name) == "fuse_expand_depthwise";
    g = bf16_apart ? keep_expansions_apart(g) : p.run(g);
    if (options.verify_each) verify(g, std::string("after ") + p.name);
    if (options.on_stage) options.on_stage(p.name, g);
    if (options.stop_after == p.name) return g;
  }
  if (options.precision == Precision::bf16) {
    g = use_bf16(g, options.bf16_amx);
    if (options.verify_each) verify(g, "after use_bf16");
    if (options.on_stage) options.on_stage("use_bf16", g);
  }
  return g;
}

}  // namespace kiln::graph
