#include "sim/maxmin.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace dionsim::sim {
namespace {
// A link counts as saturated once its remaining capacity is below this fraction of its capacity;
// relative so that it means the same for 1 GB/s and 1 TB/s links.
constexpr double kSaturatedFraction = 1e-9;
}  // namespace

LinkId MaxMinSolver::add_link(double capacity_Bps) {
  if (!(capacity_Bps > 0) || !std::isfinite(capacity_Bps)) {
    throw std::invalid_argument("MaxMinSolver::add_link: capacity must be positive and finite, got " +
                                std::to_string(capacity_Bps));
  }
  Link link;
  link.capacity = capacity_Bps;
  links_.push_back(std::move(link));
  return static_cast<LinkId>(links_.size() - 1);
}

void MaxMinSolver::set_capacity(LinkId link, double capacity_Bps) {
  if (link >= links_.size()) throw std::invalid_argument("MaxMinSolver::set_capacity: unknown link");
  if (!(capacity_Bps > 0) || !std::isfinite(capacity_Bps)) {
    throw std::invalid_argument("MaxMinSolver::set_capacity: capacity must be positive and finite, got " +
                                std::to_string(capacity_Bps));
  }
  if (links_[link].capacity == capacity_Bps) return;
  links_[link].capacity = capacity_Bps;
  if (!links_[link].flows.empty()) mark_dirty(link);
}

FlowId MaxMinSolver::add_flow(std::span<const LinkUse> route) {
  if (route.empty()) throw std::invalid_argument("MaxMinSolver::add_flow: empty route");
  for (std::size_t i = 0; i < route.size(); ++i) {
    if (route[i].link >= links_.size()) throw std::invalid_argument("MaxMinSolver::add_flow: unknown link");
    if (!(route[i].coeff > 0)) throw std::invalid_argument("MaxMinSolver::add_flow: coeff must be positive");
    for (std::size_t j = 0; j < i; ++j) {
      if (route[j].link == route[i].link) throw std::invalid_argument("MaxMinSolver::add_flow: link repeated");
    }
  }
  FlowId id = 0;
  if (!free_flows_.empty()) {
    id = free_flows_.back();
    free_flows_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[id];
  f.route.assign(route.begin(), route.end());
  f.index_in_link.resize(route.size());
  for (std::size_t i = 0; i < route.size(); ++i) {
    auto& list = links_[route[i].link].flows;
    f.index_in_link[i] = static_cast<std::uint32_t>(list.size());
    list.push_back(Incidence{id, static_cast<std::uint32_t>(i)});
    mark_dirty(route[i].link);
  }
  f.rate = 0;
  f.active = true;
  f.fresh = true;
  ++active_count_;
  return id;
}

void MaxMinSolver::remove_flow(FlowId id) {
  if (!active(id)) throw std::invalid_argument("MaxMinSolver::remove_flow: flow is not active");
  Flow& f = flows_[id];
  for (std::size_t i = 0; i < f.route.size(); ++i) {
    auto& list = links_[f.route[i].link].flows;
    const std::uint32_t pos = f.index_in_link[i];
    const Incidence moved = list.back();
    list[pos] = moved;
    flows_[moved.flow].index_in_link[moved.index_in_route] = pos;
    list.pop_back();
    mark_dirty(f.route[i].link);
  }
  f.route.clear();
  f.index_in_link.clear();
  f.active = false;
  f.rate = 0;
  free_flows_.push_back(id);
  --active_count_;
}

void MaxMinSolver::mark_dirty(LinkId link) { dirty_links_.push_back(link); }

double MaxMinSolver::load_Bps(LinkId link) const {
  double sum = 0;
  for (const auto& inc : links_[link].flows) {
    const Flow& f = flows_[inc.flow];
    sum += f.route[inc.index_in_route].coeff * f.rate;
  }
  return sum;
}

const std::vector<FlowId>& MaxMinSolver::solve() {
  changed_.clear();
  ++epoch_;
  const std::uint64_t solve_epoch = epoch_;
  std::vector<LinkId> seeds;
  seeds.swap(dirty_links_);
  recomputed_flows_ = 0;
  for (const LinkId seed : seeds) {
    if (links_[seed].mark == solve_epoch) continue;  // already part of a solved component
    collect_component(seed);
    recomputed_flows_ += component_flows_.size();
    fill_component();
  }
  return changed_;
}

// Depth-first walk links -> flows -> links; marks with the current epoch.
void MaxMinSolver::collect_component(LinkId seed) {
  component_links_.clear();
  component_flows_.clear();
  stack_.clear();
  links_[seed].mark = epoch_;
  stack_.push_back(seed);
  while (!stack_.empty()) {
    const LinkId l = stack_.back();
    stack_.pop_back();
    component_links_.push_back(l);
    for (const auto& inc : links_[l].flows) {
      Flow& f = flows_[inc.flow];
      if (f.mark == epoch_) continue;
      f.mark = epoch_;
      component_flows_.push_back(inc.flow);
      for (const auto& use : f.route) {
        if (links_[use.link].mark != epoch_) {
          links_[use.link].mark = epoch_;
          stack_.push_back(use.link);
        }
      }
    }
  }
}

// Progressive filling: every unfrozen flow's rate rises together ("water level"); the link that
// runs out first freezes its flows at the current level; repeat until every flow is frozen.
void MaxMinSolver::fill_component() {
  for (const LinkId l : component_links_) {
    Link& link = links_[l];
    link.remaining = link.capacity;
    link.weight = 0;
    link.unfrozen = static_cast<std::uint32_t>(link.flows.size());
    for (const auto& inc : link.flows) link.weight += flows_[inc.flow].route[inc.index_in_route].coeff;
  }
  for (const FlowId id : component_flows_) flows_[id].frozen = false;

  std::vector<LinkId> live = component_links_;  // links that still carry unfrozen flows
  std::erase_if(live, [&](LinkId l) { return links_[l].unfrozen == 0; });
  double level = 0;
  while (!live.empty()) {
    double delta = std::numeric_limits<double>::infinity();
    for (const LinkId l : live) delta = std::min(delta, links_[l].remaining / links_[l].weight);
    delta = std::max(delta, 0.0);
    level += delta;
    for (const LinkId l : live) links_[l].remaining -= delta * links_[l].weight;
    for (const LinkId l : live) {
      Link& link = links_[l];
      if (link.unfrozen == 0 || link.remaining > kSaturatedFraction * link.capacity) continue;
      for (const auto& inc : link.flows) {
        Flow& f = flows_[inc.flow];
        if (f.frozen) continue;
        f.frozen = true;
        const bool changed = f.fresh || std::abs(f.rate - level) > 1e-12 * std::max(f.rate, level);
        f.fresh = false;
        f.rate = level;
        if (changed) changed_.push_back(inc.flow);
        for (const auto& use : f.route) {
          Link& other = links_[use.link];
          other.weight -= use.coeff;
          --other.unfrozen;
        }
      }
    }
    std::erase_if(live, [&](LinkId l) { return links_[l].unfrozen == 0; });
    // Rounding can leave a tiny positive weight on a link whose flows are all frozen; the erase
    // above keys on the integer count, and live weights are recomputed exactly when they could
    // have drifted below zero.
    for (const LinkId l : live) {
      if (links_[l].weight <= 0) {
        Link& link = links_[l];
        link.weight = 0;
        for (const auto& inc : link.flows) {
          const Flow& f = flows_[inc.flow];
          if (!f.frozen) link.weight += f.route[inc.index_in_route].coeff;
        }
      }
    }
  }
}

}  // namespace dionsim::sim
