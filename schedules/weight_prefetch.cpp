// Software prefetch of a convolution's next chunk of weights (schedules/weight_prefetch.h).
#include "schedules/weight_prefetch.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::schedules {
namespace {

using Halide::Expr;
using Halide::Internal::Allocate;
using Halide::Internal::Block;
using Halide::Internal::Call;
using Halide::Internal::Evaluate;
using Halide::Internal::For;
using Halide::Internal::Interval;
using Halide::Internal::IRMutator;
using Halide::Internal::IRVisitor;
using Halide::Internal::LetStmt;
using Halide::Internal::Load;
using Halide::Internal::Ramp;
using Halide::Internal::Scope;
using Halide::Internal::Stmt;
using Halide::Internal::Store;
using Halide::Internal::Variable;

// Whether loop `name` is "<stage><var>" or "<stage><var>.<a split or a rebase>".
bool is_loop(const std::string& name, const std::string& stage, const std::string& var) {
  if (name.compare(0, stage.size(), stage) != 0) return false;
  const std::string rest = name.substr(stage.size());
  return rest == var || rest.compare(0, var.size() + 1, var + ".") == 0;
}

// The weight lines a statement loads, one index per line: a vector narrower than a line (AVX2's
// 8 lanes of a 16-element block) loads a line in two.
class WeightLines : public IRVisitor {
 public:
  WeightLines(const std::string& buffer, int line_elements)
      : buffer_(buffer), line_elements_(line_elements) {}

  std::vector<Expr> lines;

  // Whether `index` is on a line not seen yet (and records it).
  bool add(const Expr& index) {
    for (const Expr& seen : lines) {
      const std::optional<int64_t> d =
          Halide::Internal::as_const_int(Halide::Internal::simplify(index - seen));
      if (d && std::abs(*d) < line_elements_) return false;
    }
    lines.push_back(index);
    return true;
  }

 private:
  using IRVisitor::visit;
  void visit(const Load* op) override {
    if (op->name == buffer_) {
      const Ramp* ramp = op->index.as<Ramp>();
      add(ramp ? ramp->base : op->index);
    }
    IRVisitor::visit(op);
  }

  std::string buffer_;
  int line_elements_;
};

class PrefetchNextChunk : public IRMutator {
 public:
  explicit PrefetchNextChunk(WeightPrefetch w)
      : w_(std::move(w)), line_elements_(64 / w_.element_bytes) {}

 private:
  using IRMutator::visit;

  Stmt visit(const LetStmt* op) override {
    const auto saved = lets_.find(op->name);
    const bool shadows = saved != lets_.end();
    const Expr outer = shadows ? saved->second : Expr();
    lets_[op->name] = op->value;
    Stmt s = IRMutator::visit(op);
    if (shadows) {
      lets_[op->name] = outer;
    } else {
      lets_.erase(op->name);
    }
    return s;
  }

  // The accumulator: on the stack where a prefetch went into its reduction.
  Stmt visit(const Allocate* op) override {
    if (w_.stack_acc.empty() || op->name != w_.stack_acc) return IRMutator::visit(op);
    const int64_t bytes = int64_t{op->constant_allocation_size()} * op->type.bytes();
    const bool outer_allowed = acc_allowed_, outer_inserted = inserted_;
    acc_allowed_ = bytes > 0 && bytes <= kMaxPrefetchAcc;
    inserted_ = false;
    Stmt body = mutate(op->body);
    const bool any = inserted_;
    acc_allowed_ = outer_allowed, inserted_ = outer_inserted;
    if (!any)
      return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition, body,
                            op->new_expr, op->free_function, op->padding);
    return Allocate::make(op->name, op->type, Halide::MemoryType::Register, op->extents,
                          op->condition, body, op->new_expr, op->free_function, op->padding);
  }

  Stmt visit(const For* op) override {
    const bool steps =
        is_step_loop(op->name) && (acc_allowed_ || w_.stack_acc.empty()) && !in_steps_;
    if (!steps) {
      loops_.push_back(op);
      Stmt s = IRMutator::visit(op);
      loops_.pop_back();
      return s;
    }
    if (!pace(op)) return IRMutator::visit(op);
    in_steps_ = true;
    lines_ = WeightLines(w_.weights, line_elements_);
    Stmt body = mutate(op->body);
    in_steps_ = false;
    return For::make(op->name, op->min, op->extent, op->for_type, op->partition_policy,
                     op->device_api, body);
  }

  // After each store of the reduction, a prefetch for each weight line its value loads that no
  // earlier store of the step did (the line's variables are in scope there).
  Stmt visit(const Store* op) override {
    Stmt s = IRMutator::visit(op);
    if (!in_steps_) return s;
    WeightLines loads(w_.weights, line_elements_);
    op->value.accept(&loads);
    for (const Expr& index : loads.lines) {
      if (!lines_.add(index)) continue;
      const std::optional<Expr> step = step_stride(index);
      if (!step) continue;
      const Expr host =
          Halide::reinterpret(Halide::UInt(64), Variable::make(Halide::Handle(), w_.weights));
      const Expr address = Halide::reinterpret(
          Halide::Handle(), host + Halide::cast(Halide::UInt(64), index + lines_ahead_ * *step) *
                                       Halide::cast(Halide::UInt(64), w_.element_bytes));
      // llvm.prefetch(address, read, locality 3 (all cache levels), data cache). Halide's own
      // prefetch intrinsic is prefetchnta on x86 (see the header).
      const Expr prefetch =
          Call::make(Halide::Int(32), "llvm.prefetch.p0", {address, 0, 3, 1}, Call::Extern);
      s = Block::make(s, Evaluate::make(prefetch));
      inserted_ = true;
    }
    return s;
  }

  // The weights' stride from one step to the next, as an expression in scope at `index`:
  // the difference of the index at the next step, in the names it uses (a stride of the
  // weights' buffer is a name bound outside the loops), else with the lets around it in place
  // if that is a constant. None where the index is not linear in the step.
  std::optional<Expr> step_stride(const Expr& index) const {
    const Expr next_step = Variable::make(Halide::Int(32), step_var_) + 1;
    const auto difference = [&](const Expr& e) {
      return Halide::Internal::simplify(Halide::Internal::substitute(step_var_, next_step, e) - e);
    };
    const Expr direct = difference(index);
    if (!Halide::Internal::is_const_zero(direct) &&
        !Halide::Internal::expr_uses_var(direct, step_var_))
      return direct;
    const Expr expanded = difference(expand(index));
    if (Halide::Internal::as_const_int(expanded) && !Halide::Internal::is_const_zero(expanded))
      return expanded;
    return std::nullopt;
  }

  // "<step_stage><step_var>", or a split of a variable whose inner loop is step_var
  // ("<step_stage>r$x.rci").
  bool is_step_loop(const std::string& name) const {
    const std::string& stage = w_.step_stage;
    if (name.compare(0, stage.size(), stage) != 0) return false;
    const std::string rest = name.substr(stage.size()), end = "." + w_.step_var;
    return rest == w_.step_var || (rest.size() > end.size() &&
                                   rest.compare(rest.size() - end.size(), end.size(), end) == 0);
  }

  // Sets lines_ahead_: the steps from a step's weights to those that step p * C + r of the P
  // passes over this chunk of C steps prefetches, line (p * C + r) / P of the next chunk, which
  // starts C steps on (deep: the next chunk of the tap, the next tap's first, or after a
  // block's last, the next block's, which the next task of the same thread reads; Winograd:
  // the next position's weights). The passes are the loops around the steps that
  // WeightPrefetch::pass_vars name. False where their count or the chunk's steps have no
  // constant bound, which keeps a division by a run-time value out of the loop (edge bands
  // make fewer passes: the lines of the passes they skip come when the next chunk is read).
  bool pace(const For* steps) {
    const auto is_pass = [&](const std::string& name) {
      for (const std::string& v : w_.pass_vars)
        if (is_loop(name, w_.pass_stage, v)) return true;
      return false;
    };
    size_t first = loops_.size();
    while (first > 0 && is_pass(loops_[first - 1]->name)) --first;
    Expr pass = 0, passes = 1;
    for (size_t i = first; i < loops_.size(); ++i) {
      const For* l = loops_[i];
      pass = pass * l->extent + (Variable::make(Halide::Int(32), l->name) - l->min);
      passes = passes * l->extent;
    }
    Scope<Interval> ranges;
    for (const For* l : loops_) {
      const Expr min = Halide::Internal::simplify(expand(l->min));
      ranges.push(l->name, Interval(min, Halide::Internal::simplify(min + expand(l->extent) - 1)));
    }
    const auto bound = [&](const Expr& e) -> std::optional<int64_t> {
      const Expr b = Halide::Internal::find_constant_bound(
          Halide::Internal::simplify(expand(e)), Halide::Internal::Direction::Upper, ranges);
      const std::optional<int64_t> v =
          b.defined() ? Halide::Internal::as_const_int(b) : std::nullopt;
      if (!v || *v < 1 || *v > (int64_t{1} << 20)) return std::nullopt;
      return v;
    };
    const std::optional<int64_t> p = bound(passes), c = bound(steps->extent);
    if (!p || !c) return false;
    step_var_ = steps->name;
    const Expr r = Variable::make(Halide::Int(32), steps->name) - steps->min;
    const int chunk = static_cast<int>(*c);
    lines_ahead_ =
        Halide::Internal::simplify(chunk + (pass * chunk + r) / static_cast<int>(*p) - r);
    return true;
  }

  // `e` with the enclosing lets' values in place of their names.
  Expr expand(Expr e) const {
    for (int i = 0; i < 16; ++i) {
      const Expr next = Halide::Internal::substitute(lets_, e);
      if (Halide::Internal::equal(next, e)) break;
      e = next;
    }
    return e;
  }

  WeightPrefetch w_;
  int line_elements_;
  std::map<std::string, Expr> lets_;
  std::vector<const For*> loops_;
  bool acc_allowed_ = false, inserted_ = false, in_steps_ = false;
  Expr lines_ahead_;
  std::string step_var_;
  WeightLines lines_{"", 1};
};

}  // namespace

IRMutator* make_weight_prefetch_pass(const WeightPrefetch& w) { return new PrefetchNextChunk(w); }

}  // namespace kiln::schedules
