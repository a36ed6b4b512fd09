#include "sim/collectives.hpp"

#include <map>
#include <memory>
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

// The fast path for uniform direct collectives on a symmetric fabric.
//
// Partition the flows by their route's sequence of link kinds and the links by kind. On a
// symmetric fabric (every leaf carries the same number of nodes) every link of a kind carries
// the same number of flows of each class, and every flow of a class crosses one link of each
// kind of its signature: the partition is equitable. Progressive filling then raises, saturates
// and freezes whole classes at a time (a link's saturation time depends only on its class
// counts), all flows of a class finish together, and the partition stays equitable. So one
// solver variable per class on one solver link per kind, with coeff = flows of the class per
// link of the kind, reproduces the exact allocation. Counts come from rank 0's w-1 flows
// (transitivity): class c crosses kind K with coeff = w * n(c, K) / |K|.
CollectiveResult simulate_symmetric_direct(const topo::Topology& t, const CollectiveSpec& spec) {
  const int w = t.ranks();
  const double chunk = static_cast<double>(spec.bytes) / w;
  struct Class {
    std::vector<topo::LinkKind> kinds;
    std::int64_t flows_from_rank0 = 0;
    std::int64_t latency_ps = 0;
  };
  std::map<std::vector<topo::LinkKind>, Class> classes;
  for (int dst = 1; dst < w; ++dst) {
    std::vector<topo::LinkKind> kinds;
    for (const auto l : message_route(t, 0, dst, spec.pxn)) kinds.push_back(t.link_kind(l));
    Class& c = classes[kinds];
    c.kinds = kinds;
    ++c.flows_from_rank0;
    c.latency_ps = message_latency_ps(t, 0, dst, spec.pxn);
  }
  std::map<topo::LinkKind, std::int64_t> kind_count;
  std::map<topo::LinkKind, double> kind_capacity;
  for (std::size_t l = 0; l < t.link_count(); ++l) {
    const auto kind = t.link_kind(static_cast<topo::LinkIndex>(l));
    ++kind_count[kind];
    kind_capacity[kind] = t.link_capacity_Bps(static_cast<topo::LinkIndex>(l));
  }
  Engine engine;
  std::map<topo::LinkKind, LinkId> kind_link;
  for (const auto& [kind, capacity] : kind_capacity) kind_link[kind] = engine.add_link(capacity);

  std::size_t pending = classes.size();
  for (const auto& [key, c] : classes) {
    std::vector<LinkUse> route;
    for (const auto kind : c.kinds) {
      const double coeff = static_cast<double>(w) * static_cast<double>(c.flows_from_rank0) /
                           static_cast<double>(kind_count[kind]);
      route.push_back(LinkUse{kind_link[kind], coeff});
    }
    engine.start_flow(route, chunk, SimTime::ps(c.latency_ps), [&pending] { --pending; });
  }
  engine.run();
  if (pending != 0) throw std::logic_error("simulate_symmetric_direct: classes left undelivered");
  CollectiveResult r;
  r.time = engine.now();
  r.used_symmetry = true;
  r.solver_flows = engine.stats().flows_started;
  r.messages = static_cast<std::uint64_t>(w) * static_cast<std::uint64_t>(w - 1);
  return r;
}

}  // namespace

CollectiveResult simulate_collective(const topo::Topology& topology, const CollectiveSpec& spec, Mode mode) {
  validate_spec(spec, topology);
  const bool direct = spec.op == CollectiveOp::alltoall ||
                      (spec.op != CollectiveOp::sendrecv && spec.algorithm == Algorithm::direct);
  if (mode == Mode::fast && direct && topology.ranks() > 1 && topology.symmetric()) {
    return simulate_symmetric_direct(topology, spec);
  }
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
