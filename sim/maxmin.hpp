#pragma once
// Max-min fair bandwidth sharing by progressive filling (the flow-level network model of
// simgrid's LMM solver, STYLE.md). It knows nothing of simulation: constraints are links with a
// capacity in bytes/s, variables are flows that cross a set of links.
//
// A flow's use of a link carries a coefficient: the flow consumes `coeff x rate` of that link.
// Exact models use 1; the symmetric fast path of collectives uses one variable for a whole class
// of provably identical flows, with coeff = flows of the class per link of the link class.
//
// Incremental: add_flow/remove_flow only mark the links they touch; solve() recomputes the
// connected components (links <-> flows sharing them) that contain a marked link and leaves
// every other rate untouched.
#include <cstdint>
#include <span>
#include <vector>

namespace dionsim::sim {

using LinkId = std::uint32_t;
using FlowId = std::uint32_t;

struct LinkUse {
  LinkId link = 0;
  double coeff = 1.0;  // > 0: units of this link consumed per unit of the flow's rate
};

class MaxMinSolver {
 public:
  // capacity_Bps > 0 (throws std::invalid_argument otherwise).
  LinkId add_link(double capacity_Bps);
  [[nodiscard]] double capacity_Bps(LinkId link) const { return links_[link].capacity; }
  [[nodiscard]] std::size_t link_count() const { return links_.size(); }
  // Changes a link's capacity (> 0, finite; std::invalid_argument otherwise): the next solve()
  // recomputes its component, as after an arrival. How a contention effect (a resource shared
  // with something that is not a flow, e.g. HBM beside a kernel) reaches the flows crossing it.
  void set_capacity(LinkId link, double capacity_Bps);

  // The route must be non-empty, name existing links, and each link at most once.
  FlowId add_flow(std::span<const LinkUse> route);
  void remove_flow(FlowId flow);

  // Recomputes every component touched since the last solve. Returns the flows (new ones
  // included) whose rate differs from before; valid until the next call.
  const std::vector<FlowId>& solve();
  [[nodiscard]] bool dirty() const { return !dirty_links_.empty(); }

  // Rate in bytes/s of an active flow as of the last solve().
  [[nodiscard]] double rate_Bps(FlowId flow) const { return flows_[flow].rate; }
  [[nodiscard]] std::span<const LinkUse> route(FlowId flow) const { return flows_[flow].route; }
  [[nodiscard]] bool active(FlowId flow) const { return flow < flows_.size() && flows_[flow].active; }
  [[nodiscard]] std::size_t active_flows() const { return active_count_; }
  // Sum of coeff x rate over the link's flows (for tests and utilisation reports).
  [[nodiscard]] double load_Bps(LinkId link) const;
  // How many flows the last solve() recomputed (the incremental part: untouched components are
  // not counted).
  [[nodiscard]] std::size_t last_recomputed_flows() const { return recomputed_flows_; }

 private:
  struct Incidence {
    FlowId flow;
    std::uint32_t index_in_route;  // position of this link in the flow's route
  };
  struct Link {
    double capacity = 0;
    std::vector<Incidence> flows;
    // scratch for solve(), valid for links of the component being solved
    double remaining = 0;
    double weight = 0;              // sum of coeffs of unfrozen flows
    std::uint32_t unfrozen = 0;     // number of unfrozen flows
    std::uint64_t mark = 0;
  };
  struct Flow {
    std::vector<LinkUse> route;
    std::vector<std::uint32_t> index_in_link;  // position of this flow in each route link's list
    double rate = 0;
    bool active = false;
    bool fresh = false;  // added since the last solve
    bool frozen = false;
    std::uint64_t mark = 0;
  };

  void mark_dirty(LinkId link);
  void collect_component(LinkId seed);
  void fill_component();

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_flows_;
  std::vector<LinkId> dirty_links_;
  std::size_t active_count_ = 0;
  std::size_t recomputed_flows_ = 0;
  std::uint64_t epoch_ = 0;
  std::vector<LinkId> component_links_;
  std::vector<FlowId> component_flows_;
  std::vector<FlowId> changed_;
  std::vector<LinkId> stack_;
};

}  // namespace dionsim::sim
