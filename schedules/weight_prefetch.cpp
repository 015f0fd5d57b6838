// Software prefetch of the deep schedule's next chunk of weights (schedules/weight_prefetch.h).
#include "schedules/weight_prefetch.h"

#include <cstdlib>
#include <map>
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

bool is_loop(const std::string& name, const std::string& suffix) {
  const std::string end = "." + suffix;
  return name.size() > end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0;
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
    if (op->name != w_.acc) return IRMutator::visit(op);
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
    const std::string stage = w_.acc + ".s1.";
    const bool steps =
        op->name.compare(0, stage.size(), stage) == 0 && is_loop(op->name, w_.step_loop);
    if (!steps || !acc_allowed_ || in_steps_) {
      loops_.push_back(op);
      Stmt s = IRMutator::visit(op);
      loops_.pop_back();
      return s;
    }
    const std::optional<Expr> offset = next_chunk_offset(op);
    if (!offset) return IRMutator::visit(op);
    offset_ = *offset;
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
      const Expr host =
          Halide::reinterpret(Halide::UInt(64), Variable::make(Halide::Handle(), w_.weights));
      const Expr address = Halide::reinterpret(
          Halide::Handle(), host + Halide::cast(Halide::UInt(64), index + offset_) *
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

  // Elements from a step's weights to those that step p * C + r of the P passes over this chunk
  // of C steps prefetches: line (p * C + r) / P of the next chunk, which starts C steps on (the
  // next chunk of the tap, the next tap's first, or after a block's last, the next block's,
  // which the next task of the same thread reads). The passes are the loops over output rows
  // and tiles around the steps (WeightPrefetch::pass_vars); nothing where their count or the
  // chunk's steps have no constant bound, which keeps a division by a run-time value out of
  // the loop (edge bands make fewer passes: the lines of the passes they skip are fetched when
  // the next chunk is read).
  std::optional<Expr> next_chunk_offset(const For* steps) const {
    size_t first = loops_.size();
    while (first > 0 && is_pass_loop(loops_[first - 1]->name)) --first;
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
    if (!p || !c) return std::nullopt;
    const Expr r = Variable::make(Halide::Int(32), steps->name) - steps->min;
    const int chunk = static_cast<int>(*c);
    return Halide::Internal::simplify((chunk + (pass * chunk + r) / static_cast<int>(*p) - r) *
                                      w_.step_elements);
  }

  // A loop over the accumulator's rows or tiles in its update: "<acc>.s1.<v>" or
  // "<acc>.s1.<v>.<split or rebase>" for a pass variable v.
  bool is_pass_loop(const std::string& name) const {
    const std::string stage = w_.acc + ".s1.";
    if (name.compare(0, stage.size(), stage) != 0) return false;
    const std::string rest = name.substr(stage.size());
    for (const std::string& v : w_.pass_vars)
      if (rest == v || rest.compare(0, v.size() + 1, v + ".") == 0) return true;
    return false;
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
  Expr offset_;
  WeightLines lines_{"", 1};
};

}  // namespace

IRMutator* make_weight_prefetch_pass(const WeightPrefetch& w) { return new PrefetchNextChunk(w); }

}  // namespace kiln::schedules
