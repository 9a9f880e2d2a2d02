#pragma once
// One recorded forward program as one or more command lists (runtime/session/submit_plan.hpp): each
// records a contiguous run of the forward's steps and they are submitted back to back on the one queue.
// Each list ends with a full barrier (CommandList::end), whose second scope holds every later command in
// submission order, so the next list reads what this one wrote.
//
// Where the device has timestamps, each list is timed (two queries) and, once a run is over, the cost
// units' measured ns move the scale the cuts were planned with; when the cuts it gives differ, the lists
// are recorded again at the next submission (until then counts and timings are the last run's).  A pass far below the bound (a decode step on a GPU)
// stays one list.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/command.hpp"
#include "runtime/session/forward.hpp"
#include "runtime/session/submit_plan.hpp"

namespace reach {

class SubmitParts {
 public:
  // Records steps `s` of the forward into a list in the recording state (begun, not ended).
  using Record = std::function<ForwardCounts(CommandList&, ForwardSteps s)>;
  // plan_costs: each step's estimated cost where it is most expensive (at the capacity), which the cuts
  // are planned with; scale: ns per cost unit to start from, measured by another program of the same
  // owner, or 1 (the reference device) and not measured: then the first measurement replaces it.
  SubmitParts(Device& device, bool profile, const SubmitBound& bound, Record record, std::vector<double> plan_costs,
              double scale = 1, bool measured = false);

  // Submits every list; run_costs: each step's cost at this run's positions (empty: not timed), which the
  // measured times are divided by.
  void submit(std::vector<double> run_costs);
  // As CommandList's (of the last list: the queue runs the lists in order); the call that sees the run end
  // adapts the cuts.
  bool poll();
  bool wait_for(uint64_t timeout_ns);
  void wait() { wait_for(UINT64_MAX); }
  void run(std::vector<double> run_costs) { submit(std::move(run_costs)); wait(); }
  bool pending() const { return in_flight_; }
  VkFence fence() const { return lists_.back()->fence(); }

  bool owns(VkCommandBuffer cmd) const;   // one of its lists records into cmd
  // The lists, in submission order.
  size_t size() const { return lists_.size(); }
  const std::vector<size_t>& cuts() const { return cuts_; }
  bool timed() const { return lists_.front()->timed(); }
  // ns per cost unit the cuts follow; whether a run has measured it.
  double scale() const { return scale_; }
  bool measured() const { return measured_; }
  // GPU ns of the slowest list of the last finished run; -1 when not timed.
  double longest_ns() const { return longest_ns_; }
  // Over all lists: dispatches and barriers recorded, and per-dispatch GPU times (profile) in order.
  uint32_t dispatch_count() const;
  uint32_t barrier_count() const;
  const ForwardCounts& counts() const { return counts_; }   // the layers', over all lists
  std::vector<KernelTiming> timings() const;

 private:
  std::vector<size_t> plan() const;
  void record_lists();
  void finish();   // after the last list is done: the others' fences, the times, the cuts

  Device& device_;
  bool profile_;
  SubmitBound bound_;
  Record record_;
  std::vector<double> plan_costs_, run_costs_;
  double scale_ = 1;
  bool measured_ = false;
  double planned_scale_ = 1;   // the scale cuts_ were planned with
  bool in_flight_ = false;
  bool stale_ = false;         // the scale moved the cuts: record again before the next submission
  ForwardCounts counts_;
  double longest_ns_ = -1;
  std::vector<size_t> cuts_;
  std::vector<std::unique_ptr<CommandList>> lists_;
};

}  // namespace reach
