#include "sim/collectives.hpp"

#include <array>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "common/error.hpp"

namespace dionsim::sim {

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::alltoall: return "alltoall";
    case CollectiveOp::allgather: return "allgather";
    case CollectiveOp::reducescatter: return "reducescatter";
    case CollectiveOp::sendrecv: return "sendrecv";
    case CollectiveOp::allreduce: return "allreduce";
  }
  return "?";
}

const char* to_string(Algorithm algorithm) { return algorithm == Algorithm::direct ? "direct" : "ring"; }

std::vector<std::pair<int, int>> nccl_tests_sendrecv_pairs(int ranks, int domain) {
  if (ranks < 1 || domain < 1) throw std::invalid_argument("nccl_tests_sendrecv_pairs: ranks and domain >= 1");
  std::vector<std::pair<int, int>> pairs = {{0, 1 % ranks}};
  if (ranks > domain && domain > 1) pairs.emplace_back(domain - 1, domain);
  return pairs;
}

double bus_factor(CollectiveOp op, int ranks) {
  if (op == CollectiveOp::sendrecv || ranks <= 1) return 1.0;
  if (op == CollectiveOp::allreduce) return 2.0 * (ranks - 1) / ranks;
  return static_cast<double>(ranks - 1) / ranks;
}

std::vector<std::int64_t> sweep_sizes(std::int64_t lo, std::int64_t hi, std::int64_t factor) {
  if (lo > hi) {
    throw UsageError("invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(lo) + " > " + std::to_string(hi));
  }
  if (factor < 2) throw_bad_usage("--stepfactor", std::to_string(factor), "an integer >= 2");
  if (lo <= 0) throw_bad_usage("--minbytes", std::to_string(lo), "a size > 0 (use --bytes 0 for an empty collective)");
  std::vector<std::int64_t> sizes;
  for (std::int64_t s = lo; s <= hi; s *= factor) {
    sizes.push_back(s);
    if (s > hi / factor) break;  // the next one would pass max (or overflow)
  }
  return sizes;
}

void validate_spec(const CollectiveSpec& spec, const topo::Topology& topology) {
  if (spec.bytes < 0) throw_bad_usage("--bytes", std::to_string(spec.bytes), "a size >= 0");
  if (spec.op == CollectiveOp::sendrecv) {
    const int w = topology.ranks();
    const std::string range = "a rank in [0, " + std::to_string(w - 1) + "]";
    if (spec.src < 0 || spec.src >= w) throw_bad_usage("--src", std::to_string(spec.src), range);
    if (spec.dst < 0 || spec.dst >= w) throw_bad_usage("--dst", std::to_string(spec.dst), range);
  }
  if (spec.op == CollectiveOp::alltoall && spec.algorithm != Algorithm::direct) {
    throw_bad_usage("--algorithm", to_string(spec.algorithm), "'direct' for alltoall");
  }
  if (spec.op == CollectiveOp::allreduce && spec.algorithm != Algorithm::ring) {
    throw_bad_usage("--algorithm", to_string(spec.algorithm), "'ring' for allreduce");
  }
}

FabricNetwork::FabricNetwork(Engine& engine, const topo::Topology& topology) : engine_(engine), topology_(topology) {
  link_.reserve(topology.link_count());
  for (std::size_t l = 0; l < topology.link_count(); ++l) {
    link_.push_back(engine.add_link(topology.link_capacity_Bps(static_cast<topo::LinkIndex>(l))));
  }
}

namespace {

int pxn_proxy(const topo::Topology& t, int src, int dst) {
  if (t.spec().layout != topo::Layout::rail || t.same_domain(src, dst) || t.local_of(src) == t.local_of(dst)) {
    return -1;
  }
  return t.node_of(src) * t.gpus_per_node() + t.local_of(dst);
}

std::vector<topo::LinkIndex> message_route(const topo::Topology& t, int src, int dst, bool pxn) {
  const int proxy = pxn ? pxn_proxy(t, src, dst) : -1;
  if (proxy < 0) return t.route(src, dst);
  std::vector<topo::LinkIndex> r = t.route(src, proxy);
  for (const auto l : t.route(proxy, dst)) r.push_back(l);
  return r;
}

std::int64_t message_latency_ps(const topo::Topology& t, int src, int dst, bool pxn) {
  const int proxy = pxn ? pxn_proxy(t, src, dst) : -1;
  return proxy < 0 ? t.latency_ps(src, dst) : t.latency_ps(src, proxy) + t.latency_ps(proxy, dst);
}

}  // namespace

void FabricNetwork::send(int src, int dst, double bytes, Engine::Callback on_delivered) { send(src, dst, bytes, false, std::move(on_delivered)); }

void FabricNetwork::send(int src, int dst, double bytes, bool pxn, Engine::Callback on_delivered) {
  scratch_.clear();
  for (const topo::LinkIndex l : message_route(topology_, src, dst, pxn)) scratch_.push_back(LinkUse{link_[l], 1.0});
  engine_.start_flow(scratch_, bytes, SimTime::ps(message_latency_ps(topology_, src, dst, pxn)), std::move(on_delivered));
}

namespace {

// Shared completion counter: runs `done` after `remaining` deliveries.
struct Countdown {
  std::uint64_t remaining;
  Engine::Callback done;
  void tick() {
    if (--remaining == 0 && done) done();
  }
};

}  // namespace

std::uint64_t FabricNetwork::launch(const CollectiveSpec& spec, Engine::Callback on_done) {
  const int w = topology_.ranks();
  if (spec.bytes < 0) throw std::invalid_argument("FabricNetwork::launch: negative bytes");
  if (spec.op == CollectiveOp::sendrecv) {
    send(spec.src, spec.dst, static_cast<double>(spec.bytes), spec.pxn, std::move(on_done));
    return 1;
  }
  if (w == 1) {  // nothing leaves the rank
    engine_.after(SimTime{}, std::move(on_done));
    return 0;
  }
  const double chunk = static_cast<double>(spec.bytes) / w;
  const int steps = spec.op == CollectiveOp::allreduce ? 2 * (w - 1) : w - 1;
  const std::uint64_t messages = static_cast<std::uint64_t>(w) * static_cast<std::uint64_t>(steps);
  auto countdown = std::make_shared<Countdown>(Countdown{messages, std::move(on_done)});
  if (spec.op == CollectiveOp::alltoall || spec.algorithm == Algorithm::direct) {
    // w-1 pairwise messages per rank, all at once; the self-chunk is a local copy.
    for (int src = 0; src < w; ++src) {
      for (int k = 1; k < w; ++k) send(src, (src + k) % w, chunk, spec.pxn, [countdown] { countdown->tick(); });
    }
    return messages;
  }
  // Ring (all-gather and reduce-scatter move the same chunks): w-1 steps; at step s rank r sends
  // one chunk to r+1, which forwards (or reduces into) it at step s+1 once it has arrived. The
  // reduction's arithmetic is not modelled (it overlaps the transfer in NCCL). All-reduce is a
  // reduce-scatter then an all-gather on the same ring: 2(w-1) steps.
  struct Ring : std::enable_shared_from_this<Ring> {
    FabricNetwork* net;
    int w;
    int steps;
    double chunk;
    std::shared_ptr<Countdown> countdown;
    void step(int rank, int s) {
      const int next = (rank + 1) % w;
      net->send(rank, next, chunk, [self = shared_from_this(), next, s] {
        self->countdown->tick();
        if (s + 1 < self->steps) self->step(next, s + 1);
      });
    }
  };
  auto ring = std::make_shared<Ring>();
  ring->net = this;
  ring->w = w;
  ring->steps = steps;
  ring->chunk = chunk;
  ring->countdown = countdown;
  for (int r = 0; r < w; ++r) ring->step(r, 0);
  return messages;
}

std::uint64_t FabricNetwork::launch_alltoallv(std::span<const double> bytes, Engine::Callback on_done) {
  const int w = topology_.ranks();
  if (bytes.size() != static_cast<std::size_t>(w) * static_cast<std::size_t>(w)) {
    throw std::invalid_argument("FabricNetwork::launch_alltoallv: need ranks x ranks sizes");
  }
  std::uint64_t messages = 0;
  for (int src = 0; src < w; ++src) {
    for (int dst = 0; dst < w; ++dst) {
      const double b = bytes[static_cast<std::size_t>(src) * w + dst];
      if (!(b >= 0)) throw std::invalid_argument("FabricNetwork::launch_alltoallv: negative size");
      if (src != dst && b > 0) ++messages;
    }
  }
  if (messages == 0) {
    engine_.after(SimTime{}, std::move(on_done));
    return 0;
  }
  auto countdown = std::make_shared<Countdown>(Countdown{messages, std::move(on_done)});
  for (int src = 0; src < w; ++src) {
    for (int dst = 0; dst < w; ++dst) {
      const double b = bytes[static_cast<std::size_t>(src) * w + dst];
      if (src != dst && b > 0) send(src, dst, b, [countdown] { countdown->tick(); });
    }
  }
  return messages;
}

namespace {

// The fast path for uniform direct collectives, on any fabric this topology builds.
//
// Max-min fairness is invariant under the fabric's automorphisms, so flows one automorphism maps
// onto another get the same rate. The automorphisms used: permuting the hosts of one cell (the
// hosts one leaf group and one NVLink domain share; with one-host domains, all hosts of a leaf
// group), permuting the local GPU indices of every host at once (the rails), and permuting the
// complete periods — blocks of lcm(hosts per leaf group, hosts per domain) hosts, each made of
// whole leaf groups and whole domains — among themselves. A host's type is its cell's offset in
// its period, the trailing partial period's cells their own types. Flows fall into classes by
// (source host type, destination host type, same host, same period, same local index), links by
// (kind, owner's type); every class is one orbit, so every link of a class carries the same
// number of flows of each flow class and every flow of a class crosses the same links (an
// equitable partition). Progressive filling then raises, saturates and freezes whole classes at a
// time, and one solver variable per flow class on one solver link per link class, with coeff =
// the class's flows crossing the link class / its links, reproduces the per-flow allocation
// exactly. Classes: 2-4 host types on HGX fabrics; tens where NVL72 domains and leaf groups
// misalign.
CollectiveResult simulate_direct_by_classes(const topo::Topology& t, const CollectiveSpec& spec) {
  const int w = t.ranks();
  const int g = t.gpus_per_host();
  const std::int64_t hosts = t.hosts();
  const std::int64_t per_leaf = std::min<std::int64_t>(t.nodes_per_leaf(), hosts);  // hosts per leaf group
  const std::int64_t per_domain = t.gpus_per_domain() / g;                          // hosts per domain
  const std::int64_t period = std::min(hosts, std::lcm(per_leaf, per_domain));
  const std::int64_t complete = hosts / period;                                      // complete periods
  const double chunk = static_cast<double>(spec.bytes) / w;

  // Host types: (partial period?, leaf group offset, domain offset or -1 for one-host domains).
  std::map<std::array<std::int64_t, 3>, int> type_id;
  std::vector<int> host_type(static_cast<std::size_t>(hosts));
  std::vector<std::int64_t> type_hosts;  // hosts of the type in one instance (period)
  std::vector<std::int64_t> type_first;  // a host of the type in the first instance it occurs in
  for (std::int64_t h = 0; h < hosts; ++h) {
    const std::int64_t p = h / period, offset = h % period;
    const std::array<std::int64_t, 3> key{p >= complete ? 1 : 0, offset / per_leaf, per_domain == 1 ? -1 : offset / per_domain};
    const auto [it, added] = type_id.emplace(key, static_cast<int>(type_hosts.size()));
    if (added) {
      type_hosts.push_back(0);
      type_first.push_back(h);
    }
    if (p == 0 || p == complete) ++type_hosts[static_cast<std::size_t>(it->second)];
    host_type[static_cast<std::size_t>(h)] = it->second;
  }
  const auto partial = [&](int type) { return type_first[static_cast<std::size_t>(type)] >= complete * period; };
  const auto instances = [&](int type) { return partial(type) ? std::int64_t{1} : complete; };
  // Link classes: (kind, type of the owner: its host's for a per-GPU link, its leaf group's first host's for a leaf link).
  const auto link_class = [&](topo::LinkIndex l) {
    const topo::LinkKind kind = t.link_kind(l);
    const int owner = t.link_owner(l);
    std::int64_t host = 0;
    if (kind == topo::LinkKind::leaf_up || kind == topo::LinkKind::leaf_down) {
      const int group = t.spec().layout == topo::Layout::rail ? owner / g : owner;
      host = static_cast<std::int64_t>(group) * per_leaf;
    } else {
      host = t.host_of(owner);
    }
    return std::make_pair(static_cast<int>(kind), host_type[static_cast<std::size_t>(host)]);
  };
  std::map<std::pair<int, int>, std::int64_t> class_links;
  std::map<std::pair<int, int>, double> class_capacity;
  for (std::size_t l = 0; l < t.link_count(); ++l) {
    const auto c = link_class(static_cast<topo::LinkIndex>(l));
    ++class_links[c];
    class_capacity[c] = t.link_capacity_Bps(static_cast<topo::LinkIndex>(l));
  }
  Engine engine;
  std::map<std::pair<int, int>, LinkId> solver_link;
  for (const auto& [c, capacity] : class_capacity) solver_link[c] = engine.add_link(capacity);

  const int types = static_cast<int>(type_hosts.size());
  std::size_t pending = 0;
  std::uint64_t classes = 0;
  std::vector<LinkUse> route;
  std::map<std::pair<int, int>, int> crossings;
  for (int ts = 0; ts < types; ++ts) {
    for (int td = 0; td < types; ++td) {
      const auto hs = static_cast<double>(type_hosts[static_cast<std::size_t>(ts)]);
      const auto hd = static_cast<double>(type_hosts[static_cast<std::size_t>(td)]);
      const std::int64_t src_host = type_first[static_cast<std::size_t>(ts)];
      // (same host, same period) relations and their host-pair counts and destination hosts.
      struct Relation {
        bool same_host;
        double pairs;
        std::int64_t dst_host;
      };
      std::vector<Relation> relations;
      const bool both_partial = partial(ts) && partial(td);
      const bool same_kind = partial(ts) == partial(td);
      // Hosts of type td in the source's period (its first) other than the source itself.
      const auto other_in_period = [&]() -> std::int64_t {
        const std::int64_t from = src_host / period * period, to = std::min(hosts, from + period);
        for (std::int64_t h = from; h < to; ++h)
          if (h != src_host && host_type[static_cast<std::size_t>(h)] == td) return h;
        return -1;
      };
      const auto in_s = static_cast<double>(instances(ts)), in_d = static_cast<double>(instances(td));
      const auto periods = static_cast<double>(complete);
      if (ts == td && g > 1) relations.push_back({true, in_s * hs, src_host});
      if (same_kind) {
        const double n = in_s * (ts == td ? hs * (hs - 1) : hs * hd);
        if (n > 0) relations.push_back({false, n, other_in_period()});
      }
      if (!both_partial) {
        // Source and destination in different periods: complete x complete (ordered pairs of
        // distinct periods), or one of them the partial period.
        const double n = same_kind ? periods * (periods - 1) * hs * hd : in_s * in_d * hs * hd;
        std::int64_t dst = -1;
        if (n > 0) dst = same_kind ? type_first[static_cast<std::size_t>(td)] + period : type_first[static_cast<std::size_t>(td)];
        if (n > 0) relations.push_back({false, n, dst});
      }
      for (const Relation& rel : relations) {
        for (const bool same_local : {true, false}) {
          if (rel.same_host && same_local) continue;  // the rank itself
          if (!same_local && g == 1) continue;
          const double flows = rel.pairs * (same_local ? g : static_cast<double>(g) * (g - 1));
          if (!(flows > 0)) continue;
          if (rel.dst_host < 0) throw std::logic_error("simulate_direct_by_classes: no representative destination");
          const int src = static_cast<int>(src_host) * g;
          const int dst = static_cast<int>(rel.dst_host) * g + (same_local ? 0 : 1);
          crossings.clear();
          for (const auto l : message_route(t, src, dst, spec.pxn)) ++crossings[link_class(l)];
          route.clear();
          for (const auto& [c, times] : crossings)
            route.push_back(LinkUse{solver_link[c], flows * times / static_cast<double>(class_links[c])});
          ++pending;
          ++classes;
          engine.start_flow(route, chunk, SimTime::ps(message_latency_ps(t, src, dst, spec.pxn)), [&pending] { --pending; });
        }
      }
    }
  }
  engine.run();
  if (pending != 0) throw std::logic_error("simulate_direct_by_classes: classes left undelivered");
  CollectiveResult r;
  r.time = engine.now();
  r.used_symmetry = true;
  r.solver_flows = classes;
  r.messages = static_cast<std::uint64_t>(w) * static_cast<std::uint64_t>(w - 1);
  return r;
}

}  // namespace

CollectiveResult simulate_collective(const topo::Topology& topology, const CollectiveSpec& spec, Mode mode) {
  validate_spec(spec, topology);
  const bool direct = spec.op == CollectiveOp::alltoall ||
                      (spec.op != CollectiveOp::sendrecv && spec.algorithm == Algorithm::direct);
  if (mode == Mode::fast && direct && topology.ranks() > 1) return simulate_direct_by_classes(topology, spec);
  Engine engine;
  FabricNetwork net(engine, topology);
  bool done = false;
  CollectiveResult r;
  r.messages = net.launch(spec, [&done] { done = true; });
  engine.run();
  if (!done) throw std::logic_error("simulate_collective: collective did not complete");
  r.time = engine.now();
  r.solver_flows = engine.stats().flows_started;
  return r;
}

}  // namespace dionsim::sim
