#include "runtime/session/submit_parts.hpp"

#include <algorithm>
#include <limits>

namespace reach {

namespace {

// Lists shorter than this share of the target say little about the bound (their time is mostly fixed
// overhead: a dispatch, a barrier); the scale then follows the run's average instead of its worst list.
constexpr double kSignificant = 0.05;
// The scale has to fall this far below the one the cuts were planned with before they are merged again:
// a run-to-run spread around a cut does not re-record the program every run.
constexpr double kMergeBelow = 0.75;

}  // namespace

SubmitParts::SubmitParts(Device& device, bool profile, const SubmitBound& bound, Record record,
                         std::vector<double> plan_costs, double scale, bool measured)
    : device_(device), profile_(profile), bound_(bound), record_(std::move(record)),
      plan_costs_(std::move(plan_costs)), scale_(scale > 0 ? scale : 1), measured_(measured && scale > 0) {
  record_lists();
}

std::vector<size_t> SubmitParts::plan() const {
  if (!bound_.bounded()) return {0};
  const double budget = bound_.target_ms > 0 ? bound_.target_ms * 1e6 * kSubmitFill / scale_
                                             : std::numeric_limits<double>::infinity();
  return plan_cuts(plan_costs_, budget, bound_.max_steps);
}

void SubmitParts::record_lists() {
  cuts_ = plan();
  planned_scale_ = scale_;
  counts_ = {};
  stale_ = false;
  // The lists are recorded again, not made anew, and the last stays the last: its fence (what a host
  // waiting on a decode step holds) outlives a change of cuts.
  std::vector<std::unique_ptr<CommandList>> spare = std::move(lists_);
  lists_.clear();
  std::unique_ptr<CommandList> last;
  if (!spare.empty()) {
    last = std::move(spare.back());
    spare.pop_back();
  }
  const bool timed = bound_.target_ms > 0;   // only a time bound needs the times
  for (size_t i = 0; i < cuts_.size(); ++i) {
    std::unique_ptr<CommandList> list;
    if (i + 1 == cuts_.size() && last) list = std::move(last);
    else if (!spare.empty()) list = std::move(spare.back()), spare.pop_back();
    else list = std::make_unique<CommandList>(device_, profile_, timed);
    list->begin();
    const ForwardCounts c = record_(*list, ForwardSteps{cuts_[i], i + 1 < cuts_.size() ? cuts_[i + 1] : plan_costs_.size()});
    counts_.layer_dispatches += c.layer_dispatches;
    counts_.layer_barriers += c.layer_barriers;
    list->end();
    lists_.push_back(std::move(list));
  }
}

void SubmitParts::submit(std::vector<double> run_costs) {
  if (in_flight_) wait();
  if (stale_) record_lists();
  run_costs_ = std::move(run_costs);
  in_flight_ = true;
  // The queue runs them in order; none is waited for until the last is done.
  try {
    for (auto& list : lists_) list->submit();
  } catch (...) {
    // A list that did not go in ends the run: let the ones that did finish (or fail), then report it.
    in_flight_ = false;
    for (auto& list : lists_) {
      try {
        list->wait();
      } catch (...) {
      }
    }
    throw;
  }
}

bool SubmitParts::poll() {
  if (!in_flight_) return true;
  bool done = false;
  try {
    done = lists_.back()->poll();
  } catch (...) {
    in_flight_ = false;   // the run is over either way (device lost ...)
    throw;
  }
  if (done) finish();
  return done;
}

bool SubmitParts::wait_for(uint64_t timeout_ns) {
  if (!in_flight_) return true;
  bool done = false;
  try {
    done = lists_.back()->wait_for(timeout_ns);
  } catch (...) {
    in_flight_ = false;
    throw;
  }
  if (done) finish();
  return done;
}

void SubmitParts::finish() {
  in_flight_ = false;
  for (auto& list : lists_) list->wait();   // done: the last one ran after them
  if (!timed() || run_costs_.size() != plan_costs_.size()) return;
  const double target_ns = bound_.target_ms * 1e6;
  double longest = 0, worst = 0, total_ns = 0, total_cost = 0;
  for (size_t i = 0; i < lists_.size(); ++i) {
    const double ns = lists_[i]->elapsed_ns();
    double cost = 0;
    for (size_t s = cuts_[i]; s < (i + 1 < cuts_.size() ? cuts_[i + 1] : run_costs_.size()); ++s) cost += run_costs_[s];
    longest = std::max(longest, ns);
    total_ns += ns;
    total_cost += cost;
    if (cost > 0 && ns >= kSignificant * target_ns) worst = std::max(worst, ns / cost);
  }
  longest_ns_ = longest;
  const double observed = worst > 0 ? worst : (total_cost > 0 ? total_ns / total_cost : 0);
  if (!(observed > 0)) return;
  scale_ = measured_ ? adapt_scale(scale_, observed) : observed;
  measured_ = true;
  // Longer lists than planned are cut at once; shorter ones are merged only well below the plan.
  if (scale_ <= planned_scale_ && scale_ >= planned_scale_ * kMergeBelow) return;
  if (plan() != cuts_) stale_ = true;
  else planned_scale_ = scale_;
}

bool SubmitParts::owns(VkCommandBuffer cmd) const {
  for (const auto& list : lists_)
    if (list->handle() == cmd) return true;
  return false;
}

uint32_t SubmitParts::dispatch_count() const {
  uint32_t n = 0;
  for (const auto& list : lists_) n += list->dispatch_count();
  return n;
}

uint32_t SubmitParts::barrier_count() const {
  uint32_t n = 0;
  for (const auto& list : lists_) n += list->barrier_count();
  return n;
}

std::vector<KernelTiming> SubmitParts::timings() const {
  std::vector<KernelTiming> out;
  for (const auto& list : lists_) {
    auto t = list->timings();
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

}  // namespace reach
