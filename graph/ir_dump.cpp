// The graph IR's text dump: each node's op with its attributes, its inputs and outputs
// (`kiln inspect`, test failure messages).
#include <cmath>
#include <sstream>
#include <string>

#include "graph/ir.h"

namespace kiln::graph {

namespace {

template <typename T>
std::string list(const std::vector<T>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  s << "]";
  return s.str();
}

std::string attrs(const Op& op) {
  std::ostringstream s;
  if (const auto* c = std::get_if<Conv2d>(&op)) {
    s << "stride=" << c->stride_h << "x" << c->stride_w << " pads=[" << c->pad_top << ","
      << c->pad_left << "," << c->pad_bottom << "," << c->pad_right
      << "] dilation=" << c->dilation_h << "x" << c->dilation_w;
    if (c->groups != 1) s << " groups=" << c->groups;
    if (c->residual) s << " +residual";
    if (!c->activation.is_identity()) s << " epilogue=" << to_string(c->activation);
    if (!c->post.empty()) {
      s << " post=[";
      for (size_t i = 0; i < c->post.size(); ++i) s << (i ? "," : "") << to_string(c->post[i].kind);
      s << "]";
    }
    if (c->nchw_input) s << " nchw_input";
    if (c->bf16) s << " bf16";
    if (c->max_winograd_tile != 4) s << " winograd<=" << c->max_winograd_tile;
    if (!c->pre.empty()) {
      s << " pre=[";
      for (size_t i = 0; i < c->pre.size(); ++i) s << (i ? "," : "") << to_string(c->pre[i].kind);
      s << "]";
    }
    if (c->pool)
      s << (c->pool_first ? " input_pool=[" : " pool=[") << op_name(Op{*c->pool}) << " "
        << attrs(Op{*c->pool}) << "]";
    if (c->shortcut) s << " +shortcut";
    if (c->resize)
      s << " resize=[" << attrs(Op{*c->resize}) << (c->nchw_output ? " to NCHW" : "") << "]";
    if (c->input_scale) s << " input_scale";
    if (c->expand) {
      s << " expand=[1x1 " << to_string(*c->expand);
      for (const ChainStep& st : c->expand_post) s << "," << to_string(st.kind);
      s << "]";
    }
  } else if (const auto* bn = std::get_if<BatchNorm>(&op)) {
    s << "epsilon=" << bn->epsilon;
  } else if (const auto* cl = std::get_if<Clip>(&op)) {
    s << "min=" << cl->min << " max=" << cl->max;
  } else if (const auto* lr = std::get_if<LeakyRelu>(&op)) {
    s << "alpha=" << lr->alpha;
  } else if (const auto* hs = std::get_if<HardSigmoid>(&op)) {
    s << "alpha=" << hs->alpha << " beta=" << hs->beta;
  } else if (const auto* p = std::get_if<Pool2d>(&op)) {
    s << "kernel=" << p->kernel_h << "x" << p->kernel_w << " stride=" << p->stride_h << "x"
      << p->stride_w << " pads=[" << p->pad_top << "," << p->pad_left << "," << p->pad_bottom << ","
      << p->pad_right << "]";
    if (p->dilation_h != 1 || p->dilation_w != 1)
      s << " dilation=" << p->dilation_h << "x" << p->dilation_w;
    if (p->ceil_mode) s << " ceil_mode";
    if (p->kind == PoolKind::avg && p->count_include_pad) s << " count_include_pad";
  } else if (const auto* g = std::get_if<Gemm>(&op)) {
    s << "alpha=" << g->alpha << " beta=" << g->beta << (g->trans_a ? " transA" : "")
      << (g->trans_b ? " transB" : "");
  } else if (const auto* r = std::get_if<Reshape>(&op)) {
    s << "shape=" << to_string(r->shape);
    if (r->layout != Layout::any) s << " relabel=" << to_string(r->layout);
  } else if (const auto* t = std::get_if<Transpose>(&op)) {
    s << "perm=" << list(t->perm);
  } else if (const auto* c = std::get_if<Concat>(&op)) {
    s << "axis=" << c->axis;
  } else if (const auto* sl = std::get_if<Slice>(&op)) {
    s << "starts=" << list(sl->starts) << " ends=" << list(sl->ends)
      << " steps=" << list(sl->steps);
  } else if (const auto* pd = std::get_if<Pad>(&op)) {
    s << "pads=" << list(pd->pads);
    if (pd->mode == PadMode::constant)
      s << " value=" << pd->value;
    else
      s << " mode=" << to_string(pd->mode);
  } else if (const auto* sm = std::get_if<Softmax>(&op)) {
    s << "axis=" << sm->axis << (sm->coerce_2d ? " coerce_2d" : "");
  } else if (const auto* rm = std::get_if<Reduce>(&op)) {
    s << "axes=" << list(rm->axes) << " keepdims=" << rm->keepdims;
    if (is_arg_reduce(rm->kind)) s << " kind=" << to_string(rm->kind);
  } else if (const auto* tl = std::get_if<Tile>(&op)) {
    s << "repeats=" << list(tl->repeats);
  } else if (const auto* ln = std::get_if<LayerNorm>(&op)) {
    s << "axis=" << ln->axis << " epsilon=" << ln->epsilon;
  } else if (const auto* gn = std::get_if<GroupNorm>(&op)) {
    s << "groups=" << gn->groups << " epsilon=" << gn->epsilon;
    if (gn->residual) s << " +residual";
    if (!gn->post.empty()) {
      s << " post=[";
      for (size_t i = 0; i < gn->post.size(); ++i)
        s << (i ? "," : "") << to_string(gn->post[i].kind);
      s << "]";
    }
  } else if (const auto* rs = std::get_if<Resize>(&op)) {
    s << "mode=" << to_string(rs->mode) << " coordinates=" << to_string(rs->coordinates);
    if (rs->mode == ResizeMode::nearest) s << " nearest=" << to_string(rs->nearest);
    s << " sizes=" << to_string(rs->sizes) << " scales=" << list(rs->scales);
    if (rs->mode == ResizeMode::cubic)
      s << " cubic_a=" << rs->cubic_a << (rs->exclude_outside ? " exclude_outside" : "");
    if (rs->coordinates == ResizeCoordinates::tf_crop_and_resize)
      s << " roi=" << list(rs->roi) << " extrapolation=" << rs->extrapolation;
  } else if (const auto* tk = std::get_if<TopK>(&op)) {
    s << "axis=" << tk->axis << " k=" << tk->k << (tk->largest ? " largest" : " smallest")
      << (tk->indices ? " indices" : " values");
  } else if (const auto* ge = std::get_if<GatherElements>(&op)) {
    s << "axis=" << ge->axis << (ge->broadcast ? " broadcast" : "");
  } else if (const auto* se = std::get_if<ScatterElements>(&op)) {
    s << "axis=" << se->axis << " reduction=" << to_string(se->reduction);
  } else if (const auto* gs = std::get_if<GridSample>(&op)) {
    s << "mode=" << to_string(gs->mode) << " padding=" << to_string(gs->padding)
      << (gs->align_corners ? " align_corners" : "");
  } else if (const auto* ch = std::get_if<ElementwiseChain>(&op)) {
    s << "steps=[";
    for (size_t i = 0; i < ch->steps.size(); ++i)
      s << (i ? "," : "") << to_string(ch->steps[i].kind);
    s << "]";
  } else if (const auto* t = std::get_if<LayoutTransform>(&op)) {
    s << to_string(t->from) << "->" << to_string(t->to);
  }
  return s.str();
}

}  // namespace

std::string op_attributes(const Op& op) { return attrs(op); }

std::string dump(const Graph& g) {
  std::ostringstream s;
  auto value_str = [&](ValueId id) {
    const Value& v = g.value(id);
    std::ostringstream vs;
    vs << "%" << id.index << ":" << v.name << to_string(v.shape);
    if (v.layout != Layout::any) vs << to_string(v.layout);
    return vs.str();
  };
  s << "graph: " << g.num_nodes() << " nodes, inputs:";
  for (ValueId v : g.inputs) s << " " << value_str(v);
  s << "\n";
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    s << "  #" << i << " " << op_name(n.op) << " '" << n.name << "'";
    const std::string a = attrs(n.op);
    if (!a.empty()) s << " {" << a << "}";
    s << "\n      in:";
    for (ValueId v : n.inputs)
      s << " " << value_str(v) << (g.value(v).is_constant() ? "=const" : "");
    s << "\n      out:";
    for (ValueId v : n.outputs) s << " " << value_str(v);
    s << "\n";
  }
  s << "  outputs:";
  for (ValueId v : g.outputs) s << " " << value_str(v);
  s << "\n";
  return s.str();
}

}  // namespace kiln::graph
