// ONNX Einsum as the graph ops it amounts to: per operand a sum over the letters only it has,
// then for two operands one batched MatMul between Transposes and Reshapes (batch letters,
// the left operand's free letters, the contracted ones; the right operand's free letters), and
// a last Transpose into the output's order. One operand is a sum and a Transpose. Exporters
// write it for attention (torch.einsum("bhid,bhjd->bhij", q, k)) and linear maps over a
// chosen axis; Kiln's kernels then see a MatMul like any other.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

// One operand's subscripts, a letter per axis ('...' expanded to upper-case letters that no
// term can use: ONNX subscripts are lower-case letters).
using Term = std::string;

struct Equation {
  std::vector<Term> inputs;
  Term output;
};

// Parses `eq` for operands of the given ranks: an ellipsis stands for the axes a term's
// letters leave (the same count in every term that has one, numpy's broadcasting of them is
// not supported), and without "->" the output is the letters used once, in alphabetical order,
// after the ellipsis' axes.
Equation parse_equation(const NodeCtx& c, std::string eq, const std::vector<size_t>& ranks) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> raw;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    raw.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (raw.size() != ranks.size())
    node_error(c, "equation '" + eq + "' has " + std::to_string(raw.size()) + " terms for " +
                      std::to_string(ranks.size()) + " inputs");
  int ellipsis_axes = -1;
  const auto expand = [&](const std::string& t, size_t rank, bool is_output) {
    const size_t dots = t.find("...");
    std::string letters = t;
    if (dots != std::string::npos) letters.erase(dots, 3);
    for (char ch : letters)
      if (ch < 'a' || ch > 'z')
        node_error(c, "equation '" + eq + "': subscript '" + std::string(1, ch) +
                          "' is not a lower-case letter");
    if (dots == std::string::npos) {
      if (!is_output && letters.size() != rank)
        node_error(c, "equation '" + eq + "': term '" + t + "' has " +
                          std::to_string(letters.size()) + " subscripts for an input of rank " +
                          std::to_string(rank));
      return letters;
    }
    if (!is_output) {
      if (letters.size() > rank)
        node_error(c, "equation '" + eq + "': term '" + t + "' is longer than its input's rank");
      const int n = static_cast<int>(rank - letters.size());
      if (ellipsis_axes >= 0 && n != ellipsis_axes)
        node_error(c, "equation '" + eq +
                          "': the ellipsis stands for different numbers of axes "
                          "(broadcasting them is not supported)");
      if (n > 26) node_error(c, "equation '" + eq + "': the ellipsis stands for more than 26 axes");
      ellipsis_axes = n;
    }
    std::string axes;
    for (int i = 0; i < std::max(ellipsis_axes, 0); ++i) axes.push_back(static_cast<char>('A' + i));
    return t.substr(0, dots) + axes + t.substr(dots + 3);
  };
  Equation e;
  for (size_t i = 0; i < raw.size(); ++i) e.inputs.push_back(expand(raw[i], ranks[i], false));
  if (arrow != std::string::npos) {
    e.output = expand(eq.substr(arrow + 2), 0, true);
  } else {
    std::map<char, int> uses;
    for (const Term& t : e.inputs)
      for (char ch : t) ++uses[ch];
    for (const auto& [ch, n] : uses)  // upper case (the ellipsis) sorts first
      if (n == 1 || ch < 'a') e.output.push_back(ch);
  }
  for (size_t i = 0; i < e.output.size(); ++i) {
    if (e.output.find(e.output[i]) != i)
      node_error(c, "equation '" + eq + "': output subscript '" + std::string(1, e.output[i]) +
                        "' repeats");
    bool found = false;
    for (const Term& t : e.inputs) found = found || t.find(e.output[i]) != std::string::npos;
    if (!found)
      node_error(c, "equation '" + eq + "': output subscript '" + std::string(1, e.output[i]) +
                        "' is in no input");
  }
  for (const Term& t : e.inputs)
    for (size_t i = 0; i < t.size(); ++i)
      if (t.find(t[i]) != i)
        node_error(c, "equation '" + eq + "': subscript '" + std::string(1, t[i]) +
                          "' repeats within a term (a diagonal), which is not supported");
  return e;
}

bool contains(const std::string& s, char ch) { return s.find(ch) != std::string::npos; }

// An operand on its way through the rewrite: its graph value and its letters, one per axis.
struct Operand {
  ValueId value;
  Term letters;
  Shape shape;
};

class EinsumBuilder {
 public:
  EinsumBuilder(Importer& im, const NodeCtx& c)
      : im_(im), c_(c), base_(im.output_name(c, 0) + "/") {}

  // The operand summed over the letters in none of `keep`.
  Operand sum_unshared(Operand x, const std::string& keep) {
    std::vector<int> axes;
    Term letters;
    Shape shape;
    for (size_t a = 0; a < x.letters.size(); ++a) {
      if (contains(keep, x.letters[a])) {
        letters.push_back(x.letters[a]);
        shape.push_back(x.shape[a]);
      } else {
        axes.push_back(static_cast<int>(a));
      }
    }
    if (axes.empty()) return x;
    return {emit(Reduce{axes, false, ReduceKind::sum}, {x.value}, "sum"), letters, shape};
  }

  // x's axes in the order of `order` (a permutation of its letters).
  Operand permute(Operand x, const Term& order) {
    if (order == x.letters) return x;
    Transpose t;
    Shape shape;
    for (char ch : order) {
      const size_t a = x.letters.find(ch);
      t.perm.push_back(static_cast<int>(a));
      shape.push_back(x.shape[a]);
    }
    return {emit(t, {x.value}, "transpose"), order, shape};
  }

  ValueId reshape(ValueId v, const Shape& from, const Shape& to) {
    return from == to ? v : emit(Reshape{to}, {v}, "reshape");
  }

  // a x b contracted over the letters in both but not in `keep` (their sizes agree: checked
  // on the inputs); the result's letters are the batch letters (in both and kept), a's free
  // letters, then b's.
  Operand contract(Operand a, Operand b, const std::string& keep) {
    Term batch, left, inner, right;
    for (char ch : a.letters) {
      if (contains(b.letters, ch)) {
        (contains(keep, ch) ? batch : inner).push_back(ch);
      } else {
        left.push_back(ch);
      }
    }
    for (char ch : b.letters)
      if (!contains(a.letters, ch)) right.push_back(ch);
    a = permute(a, batch + left + inner);
    b = permute(b, batch + inner + right);
    const auto size_of = [](const Operand& x, const Term& letters) {
      int64_t n = 1;
      for (char ch : letters) n *= x.shape[x.letters.find(ch)];
      return n;
    };
    const int64_t nb = size_of(a, batch), nl = size_of(a, left), nk = size_of(a, inner),
                  nr = size_of(b, right);
    Shape out_shape;
    for (char ch : batch + left) out_shape.push_back(a.shape[a.letters.find(ch)]);
    for (char ch : right) out_shape.push_back(b.shape[b.letters.find(ch)]);
    // Without batch letters a MatMul of a's [..., K] by a 2-D [K, N] keeps a's leading axes
    // (a linear map: no Reshape of the activations).
    if (batch.empty() && inner.size() == 1 && right.size() == 1 && !left.empty()) {
      const ValueId m = emit(MatMul{}, {a.value, b.value}, "matmul");
      return {m, left + right, out_shape};
    }
    const Shape a3{nb, nl, nk}, b3{nb, nk, nr};
    const ValueId m =
        emit(MatMul{}, {reshape(a.value, a.shape, a3), reshape(b.value, b.shape, b3)}, "matmul");
    return {reshape(m, Shape{nb, nl, nr}, out_shape), batch + left + right, out_shape};
  }

  void finish(const Operand& x, const Term& output) {
    im_.define_value(c_, 0, permute(x, output).value);
  }

 private:
  ValueId emit(Op op, std::vector<ValueId> in, const std::string& what) {
    const std::string name = base_ + what + "_" + std::to_string(count_++);
    return im_.emit(c_, std::move(op), std::move(in), name, name);
  }

  Importer& im_;
  const NodeCtx& c_;
  std::string base_;
  int count_ = 0;
};

}  // namespace

void convert_einsum(Importer& im, const NodeCtx& c) {
  if (c.proto->input_size() < 1) node_error(c, "expected at least one input");
  std::vector<size_t> ranks;
  std::vector<Operand> operands;
  for (int i = 0; i < c.proto->input_size(); ++i) {
    const Shape s = im.input_shape(c, i);
    ranks.push_back(s.size());
    operands.push_back({im.value_input(c, i), {}, s});
  }
  const std::string text = attr_string(c, "equation", "");
  if (text.empty()) node_error(c, "attribute 'equation' is missing");
  const Equation e = parse_equation(c, text, ranks);
  for (size_t i = 0; i < operands.size(); ++i) operands[i].letters = e.inputs[i];
  for (const Operand& x : operands)
    for (size_t a = 0; a < x.letters.size(); ++a)
      for (const Operand& y : operands) {
        const size_t b = y.letters.find(x.letters[a]);
        if (b != std::string::npos && x.shape[a] != y.shape[b])
          node_error(c, "equation '" + text + "': subscript '" + std::string(1, x.letters[a]) +
                            "' has sizes " + std::to_string(x.shape[a]) + " and " +
                            std::to_string(y.shape[b]));
      }
  EinsumBuilder b(im, c);
  // Left to right: each step keeps the letters the output or a later operand still needs. The
  // product of acc and the next operand then holds only such letters: acc's own ones were
  // needed after the step before, and those of operand i alone are contracted.
  const auto needed_after = [&](size_t i) {
    std::string keep = e.output;
    for (size_t j = i + 1; j < operands.size(); ++j) keep += operands[j].letters;
    return keep;
  };
  Operand acc = b.sum_unshared(operands[0], needed_after(0));
  for (size_t i = 1; i < operands.size(); ++i) {
    const Operand next = b.sum_unshared(operands[i], needed_after(i) + acc.letters);
    acc = b.contract(acc, next, needed_after(i));
  }
  b.finish(acc, e.output);
}

}  // namespace kiln::graph::onnx
