// Model-local functions: inlining each call of ModelProto.functions (functions.h).
#include "graph/onnx/functions.h"

#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "graph/ir.h"
#include "graph/onnx/importer.h"  // kMaxGraphNodes

namespace kiln::graph::onnx {
namespace {

using ::onnx::AttributeProto;
using ::onnx::FunctionProto;
using ::onnx::NodeProto;

// Calls nested deeper than this are refused (a legal model nests a few).
constexpr int kMaxDepth = 32;

// Fields newer than Debian's ONNX 1.12 classes, kept by protobuf as unknown fields.
constexpr int kFunctionAttributeProtoField = 11;  // FunctionProto.attribute_proto (IR 9)
constexpr int kFunctionOverloadField = 13;        // FunctionProto.overload (IR 10)
constexpr int kNodeOverloadField = 8;             // NodeProto.overload (IR 10)

// The length-delimited values of unknown field `number` of `m`.
std::vector<std::string> unknown_strings(const google::protobuf::Message& m, int number) {
  std::vector<std::string> out;
  const google::protobuf::UnknownFieldSet& u = m.GetReflection()->GetUnknownFields(m);
  for (int k = 0; k < u.field_count(); ++k)
    if (u.field(k).number() == number &&
        u.field(k).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      out.push_back(u.field(k).length_delimited());
  return out;
}

std::string overload_of(const google::protobuf::Message& m, int field) {
  const std::vector<std::string> v = unknown_strings(m, field);
  return v.empty() ? std::string() : v.back();
}

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

using Key = std::tuple<std::string, std::string, std::string>;  // domain, name, overload

struct Function {
  const FunctionProto* proto = nullptr;
  int opset = 0;                                   // its default-domain opset
  std::map<std::string, AttributeProto> defaults;  // attribute_proto, by name
};

class Flattener {
 public:
  Flattener(const ::onnx::ModelProto& model, int model_opset, int max_opset)
      : model_opset_(model_opset) {
    for (const FunctionProto& f : model.functions()) {
      const std::string what = "model-local function '" + f.domain() + "." + f.name() + "'";
      Function fn{&f, model_opset, {}};
      for (const auto& op : f.opset_import()) {
        if (!is_default_domain(op.domain())) continue;
        if (op.version() < 1 || op.version() > max_opset)
          throw Error(what + " uses opset " + std::to_string(op.version()) +
                      " of the default ONNX domain; Kiln supports opsets 1 to " +
                      std::to_string(max_opset));
        fn.opset = static_cast<int>(op.version());
      }
      for (const std::string& bytes : unknown_strings(f, kFunctionAttributeProtoField)) {
        AttributeProto a;
        if (!a.ParseFromString(bytes) || a.name().empty())
          throw Error(what + " has an unreadable attribute default");
        fn.defaults[a.name()] = a;
      }
      const Key key{f.domain(), f.name(), overload_of(f, kFunctionOverloadField)};
      if (!functions_.emplace(key, std::move(fn)).second) throw Error(what + " is defined twice");
    }
  }

  std::vector<FlatNode> run(const ::onnx::GraphProto& g) {
    for (int idx = 0; idx < g.node_size(); ++idx) {
      const NodeProto& p = g.node(idx);
      const std::string name =
          p.name().empty() ? p.op_type() + "_" + std::to_string(idx) : p.name();
      // The model's own nodes are not copied (Constant nodes may hold weights): a pointer
      // that owns nothing, valid while the model is.
      add(std::shared_ptr<const NodeProto>(std::shared_ptr<void>(), &p), name, model_opset_, 0);
    }
    return std::move(out_);
  }

 private:
  const Function* find(const NodeProto& p) const {
    if (functions_.empty()) return nullptr;
    const auto it =
        functions_.find(Key{p.domain(), p.op_type(), overload_of(p, kNodeOverloadField)});
    return it == functions_.end() ? nullptr : &it->second;
  }

  void add(std::shared_ptr<const NodeProto> p, const std::string& name, int opset, int depth) {
    const Function* f = find(*p);
    if (!f) {
      // Calls of calls multiply: a small file could otherwise expand past any memory.
      if (out_.size() >= kMaxGraphNodes)
        throw Error("node '" + name + "': the graph, its functions inlined, exceeds " +
                    std::to_string(kMaxGraphNodes) + " nodes");
      out_.push_back({std::move(p), name, opset});
      return;
    }
    const std::string what = "node '" + name + "' (" + p->op_type() + "), a call of function '" +
                             f->proto->domain() + "." + f->proto->name() + "'";
    if (depth >= kMaxDepth)
      throw Error(what + ": function calls nest deeper than " + std::to_string(kMaxDepth));
    if (active_.count(f->proto))
      throw Error(what + ": the call is inside the function's own body (a cycle of calls)");
    if (out_.size() + inlined_size(*f) > kMaxGraphNodes)
      throw Error(what + ": the graph, its functions inlined, exceeds " +
                  std::to_string(kMaxGraphNodes) + " nodes");
    inline_call(*p, *f, name, what, depth);
  }

  // The nodes a call of `f` becomes, counted before any is made (capped past kMaxGraphNodes).
  // A cycle, or calls nested past kMaxDepth, count as one node here (no deeper recursion: a
  // chain of a million functions must not exhaust the stack); the expansion refuses both.
  size_t inlined_size(const Function& f, int depth = 0) {
    const auto known = sizes_.find(f.proto);
    if (known != sizes_.end()) return known->second;
    if (depth >= kMaxDepth) return 1;
    sizes_[f.proto] = 1;  // in progress: a cycle stops here
    size_t n = 0;
    for (const NodeProto& body : f.proto->node()) {
      const Function* callee = find(body);
      n = std::min(n + (callee ? inlined_size(*callee, depth + 1) : 1), kMaxGraphNodes + 1);
    }
    return sizes_[f.proto] = n;
  }

  void inline_call(const NodeProto& call, const Function& f, const std::string& name,
                   const std::string& what, int depth) {
    const FunctionProto& fp = *f.proto;
    if (call.input_size() > fp.input_size())
      throw Error(what + " has " + std::to_string(call.input_size()) +
                  " inputs; the function takes " + std::to_string(fp.input_size()));
    if (call.output_size() > fp.output_size())
      throw Error(what + " has " + std::to_string(call.output_size()) +
                  " outputs; the function has " + std::to_string(fp.output_size()));
    const std::set<std::string> declared(fp.attribute().begin(), fp.attribute().end());
    std::map<std::string, const AttributeProto*> given;
    for (const AttributeProto& a : call.attribute()) {
      if (!declared.count(a.name()) && !f.defaults.count(a.name()))
        throw Error(what + " sets attribute '" + a.name() +
                    "', which the function does not declare");
      given[a.name()] = &a;
    }
    // A prefix no other call has used: internal names stay distinct between calls.
    std::string prefix = name + "/";
    for (int k = 2; !prefixes_.insert(prefix).second; ++k)
      prefix = name + "~" + std::to_string(k) + "/";
    std::unordered_map<std::string, std::string> rename;
    for (int i = 0; i < fp.input_size(); ++i)
      rename[fp.input(i)] = i < call.input_size() ? call.input(i) : std::string();
    for (int k = 0; k < fp.output_size(); ++k)
      if (k < call.output_size() && !call.output(k).empty()) rename[fp.output(k)] = call.output(k);
    const auto bound = [&](const std::string& n) -> std::string {
      if (n.empty()) return n;
      const auto it = rename.find(n);
      return it != rename.end() ? it->second : prefix + n;
    };
    active_.insert(f.proto);
    for (int idx = 0; idx < fp.node_size(); ++idx) {
      const NodeProto& body = fp.node(idx);
      auto node = std::make_shared<NodeProto>(body);
      for (int i = 0; i < node->input_size(); ++i) node->set_input(i, bound(body.input(i)));
      for (int k = 0; k < node->output_size(); ++k) node->set_output(k, bound(body.output(k)));
      node->clear_attribute();
      for (const AttributeProto& a : body.attribute()) {
        if (a.ref_attr_name().empty()) {
          *node->add_attribute() = a;
          continue;
        }
        const auto g = given.find(a.ref_attr_name());
        const auto d = f.defaults.find(a.ref_attr_name());
        const AttributeProto* value = g != given.end()        ? g->second
                                      : d != f.defaults.end() ? &d->second
                                                              : nullptr;
        if (!value) continue;  // neither the call nor a default sets it: the attribute is unset
        AttributeProto& copy = *node->add_attribute();
        copy = *value;
        copy.set_name(a.name());
      }
      const std::string body_name =
          body.name().empty() ? body.op_type() + "_" + std::to_string(idx) : body.name();
      node->set_name(prefix + body_name);
      add(node, prefix + body_name, f.opset, depth + 1);
    }
    active_.erase(f.proto);
  }

  int model_opset_;
  std::map<Key, Function> functions_;
  std::set<const FunctionProto*> active_;  // the functions whose calls are being inlined
  std::set<std::string> prefixes_;
  std::map<const FunctionProto*, size_t> sizes_;  // inlined_size
  std::vector<FlatNode> out_;
};

}  // namespace

std::vector<FlatNode> flatten_functions(const ::onnx::ModelProto& model, int model_opset,
                                        int max_opset) {
  return Flattener(model, model_opset, max_opset).run(model.graph());
}

std::vector<FlatNode> live_nodes(std::vector<FlatNode> nodes, const ::onnx::GraphProto& graph) {
  std::set<std::string> needed;
  for (const auto& out : graph.output()) needed.insert(out.name());
  std::vector<bool> live(nodes.size(), false);
  for (size_t k = nodes.size(); k-- > 0;) {
    const auto& p = *nodes[k].proto;
    for (const std::string& out : p.output()) live[k] = live[k] || needed.count(out) > 0;
    if (live[k])
      for (const std::string& in : p.input()) needed.insert(in);
  }
  std::vector<FlatNode> kept;
  for (size_t k = 0; k < nodes.size(); ++k)
    if (live[k]) kept.push_back(std::move(nodes[k]));
  return kept;
}

}  // namespace kiln::graph::onnx
