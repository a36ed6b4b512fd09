#include "sim/aws_ofi_tuner.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace dionsim::sim {

namespace {

// The plane the regions live in: x = message bytes, y = ranks, both on a log2 scale (0 is taken
// as 1e-6, the tuner's rule).
struct Point {
  double x = 0, y = 0;
};
Point log2_point(double bytes, double ranks) {
  return {std::log2(bytes > 0 ? bytes : 1e-6), std::log2(ranks > 0 ? ranks : 1e-6)};
}

// The tuner's far corner: every region is closed by vertices projected onto its size / rank
// limits (100 GiB, 2^20 ranks).
constexpr double kMaxBytes = 100.0 * 1024 * 1024 * 1024;
constexpr double kMaxRanks = 1024.0 * 1024;

// The point where the line through a and b (raw coordinates) leaves the box [.., max bytes] x
// [.., max ranks], in log2 coordinates: how the tables close a region towards the limits.
Point extended(Point a_raw, Point b_raw) {
  const Point a = log2_point(a_raw.x, a_raw.y), b = log2_point(b_raw.x, b_raw.y);
  const Point z = log2_point(kMaxBytes, kMaxRanks);
  if (a.x == b.x) return {a.x, z.y};
  if (a.y == b.y) return {z.x, a.y};
  const double m = (a.y - b.y) / (a.x - b.x);
  const double c = b.y - m * b.x;
  const double at_max_bytes = m * z.x + c;
  if (at_max_bytes < z.y) return {z.x, at_max_bytes};
  return {(z.y - c) / m, z.y};
}

struct Region {
  NcclAlgo algo;
  NcclProto proto;
  std::vector<Point> vertices;  // log2 coordinates
};

// A vertex given in raw (bytes, ranks) or already extended (log2).
struct Vertex {
  Point p;
  bool log2 = false;
};
Vertex raw(double bytes, double ranks) { return {{bytes, ranks}, false}; }
Vertex ext(Point a_raw, Point b_raw) { return {extended(a_raw, b_raw), true}; }

Region region(NcclAlgo a, NcclProto p, std::initializer_list<Vertex> vs) {
  Region r{a, p, {}};
  for (const auto& v : vs) r.vertices.push_back(v.log2 ? v.p : log2_point(v.p.x, v.p.y));
  return r;
}

double distance_to_segment(Point p, Point a, Point b) {
  const double dx = b.x - a.x, dy = b.y - a.y;
  const double len2 = dx * dx + dy * dy;
  double t = len2 > 0 ? ((p.x - a.x) * dx + (p.y - a.y) * dy) / len2 : 0.0;
  t = std::clamp(t, 0.0, 1.0);
  const double ex = a.x + t * dx - p.x, ey = a.y + t * dy - p.y;
  return std::sqrt(ex * ex + ey * ey);
}

// On an edge (within 1e-10, the tuner's eps) or inside by the even-odd rule.
bool inside(const Region& r, Point p) {
  const auto& v = r.vertices;
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i)
    if (distance_to_segment(p, v[i], v[(i + 1) % n]) < 1e-10) return true;
  bool in = false;
  for (std::size_t i = 0, j = n - 1; i < n; j = i++) {
    if ((v[i].y > p.y) != (v[j].y > p.y)) {
      const double x_cross = v[j].x + (p.y - v[j].y) * (v[i].x - v[j].x) / (v[i].y - v[j].y);
      if (p.x < x_cross) in = !in;
    }
  }
  return in;
}

using A = NcclAlgo;
using P = NcclProto;

// p5 / p5e, 8 GPUs per node, all-reduce.
const std::vector<Region>& p5_allreduce() {
  static const std::vector<Region> r = [] {
    const Point tree_ll128_a{402653184, 2048}, tree_ll128_b{402653184, 4096};
    const Point nvlstree_a{8053063680, 160}, nvlstree_b{9663676416, 192};
    const Vertex e_tree = ext(tree_ll128_a, tree_ll128_b);
    const Vertex e_nvls = ext(nvlstree_a, nvlstree_b);
    // The ring's extended vertex on its own row of 17 ranks.
    const Vertex e_ring_row{{e_nvls.p.x, std::log2(17.0)}, true};
    return std::vector<Region>{
        region(A::tree, P::ll128,
               {raw(0, 16), raw(31457280, 16), raw(37748736, 32), raw(117440512, 64), raw(301989888, 128),
                raw(301989888, 256), raw(335544320, 512), raw(536870912, 1024), raw(402653184, 2048),
                raw(402653184, 4096), e_tree, {{log2_point(0, 1).x, e_tree.p.y}, true}}),
        region(A::nvls_tree, P::simple, {raw(31457281, 16), raw(kMaxBytes, 16), raw(31457281, 16)}),
        region(A::ring, P::ll128,
               {raw(31457280, 17), raw(1073741824, 17), raw(2147483648, 64), raw(2147483648, 128),
                raw(1342177280, 160), raw(2147483648, 256), raw(1074790400, 256), raw(444596224, 160),
                raw(301989888, 128), raw(117440512, 64), raw(37748736, 32)}),
        region(A::nvls_tree, P::simple,
               {raw(2147483648, 128), raw(6442450944, 128), raw(8053063680, 160), raw(9663676416, 192), e_nvls,
                e_tree, raw(402653184, 4096), raw(402653184, 2048), raw(536870912, 1024), raw(335544320, 512),
                raw(301989888, 256), raw(310378496, 160), raw(444596224, 160), raw(1074790400, 256),
                raw(2684354560, 256), raw(2147483648, 224), raw(1342177280, 160)}),
        region(A::ring, P::simple,
               {raw(1073741824, 17), e_ring_row, e_nvls, raw(9663676416, 192), raw(8053063680, 160),
                raw(2684354560, 64), raw(1610612736, 32)}),
    };
  }();
  return r;
}

// p5en, 8 GPUs per node.
const std::vector<Region>& p5en_allreduce() {
  static const std::vector<Region> r = [] {
    const Vertex e_ll = ext({196608, 192}, {196608, 1024});
    const Vertex e_ll128 = ext({129499136, 127}, {218103808, 1024});
    const Vertex e_nvls = ext({7516192768, 256}, {17179869184, 448});
    return std::vector<Region>{
        region(A::tree, P::ll, {raw(0, 16), raw(196608, 16), raw(196608, 1024), e_ll, raw(0, kMaxRanks)}),
        region(A::tree, P::ll128,
               {e_ll, raw(196608, 1024), raw(196608, 16), raw(13107200, 16), raw(129499136, 127),
                raw(218103808, 1024), e_ll128}),
        region(A::ring, P::ll128,
               {raw(129499136, 127), raw(13107200, 16), raw(29884416, 16), raw(293601280, 32), raw(589299712, 64),
                raw(549453824, 128)}),
        region(A::nvls_tree, P::simple,
               {e_ll128, raw(218103808, 1024), raw(129499136, 127), raw(549453824, 128), raw(589299712, 64),
                raw(293601280, 32), raw(29884416, 16), raw(kMaxBytes, 16), raw(509607936, 32), raw(7516192768, 256),
                raw(17179869184, 448), e_nvls}),
        region(A::ring, P::simple,
               {e_nvls, raw(17179869184, 448), raw(7516192768, 256), raw(509607936, 32), raw(kMaxBytes, 16)}),
    };
  }();
  return r;
}

const std::vector<Region>& p5en_allgather() {
  static const std::vector<Region> r = [] {
    const Vertex e_ll = ext({28305408, 768}, {33554432, 1024});
    const Vertex e_ll128 = ext({7247754240, 384}, {17179865088, 896});
    return std::vector<Region>{
        region(A::ring, P::ll,
               {raw(0, 16), raw(786432, 16), raw(4718592, 128), raw(13630464, 384), raw(19922944, 512),
                raw(28305408, 768), raw(33554432, 1024), e_ll, raw(0, kMaxRanks)}),
        region(A::ring, P::ll128,
               {e_ll, raw(33554432, 1024), raw(28305408, 768), raw(19922944, 512), raw(13630464, 384),
                raw(4718592, 128), raw(786432, 16), raw(236978176, 16), raw(956301312, 64), raw(7247754240, 384),
                raw(17179865088, 896), e_ll128}),
        region(A::ring, P::simple,
               {e_ll128, raw(17179865088, 896), raw(7247754240, 384), raw(956301312, 64), raw(494927872, 32),
                raw(236978176, 16), raw(kMaxBytes, 16)}),
    };
  }();
  return r;
}

const std::vector<Region>& p5en_reducescatter() {
  static const std::vector<Region> r = [] {
    const Vertex e_ll = ext({7340032, 256}, {18874368, 512});
    const Vertex e_ll128 = ext({7247757312, 256}, {17179869184, 640});
    return std::vector<Region>{
        region(A::ring, P::ll,
               {raw(0, 16), raw(786432, 16), raw(4718592, 128), raw(7340032, 256), raw(18874368, 512), e_ll,
                raw(0, kMaxRanks)}),
        region(A::ring, P::ll128,
               {e_ll, raw(18874368, 512), raw(7340032, 256), raw(4718592, 128), raw(786432, 16), raw(291504128, 16),
                raw(589299712, 32), raw(2415919104, 128), raw(7247757312, 256), raw(17179869184, 640), e_ll128}),
        region(A::ring, P::simple,
               {e_ll128, raw(17179869184, 640), raw(7247757312, 256), raw(2415919104, 128), raw(589299712, 32),
                raw(291504128, 16), raw(kMaxBytes, 16)}),
    };
  }();
  return r;
}

// p6-b200, 8 GPUs per node (region_init_internal_p6).
const std::vector<Region>& p6_allreduce() {
  static const std::vector<Region> r = [] {
    const Vertex e_ll = ext({393216, 16}, {393216, 1024});
    const Vertex e_ll128 = ext({96993280, 1024}, {106430464, 2048});
    const Vertex e_nvls = ext({10737418240, 512}, {34359738368, 1500});
    return std::vector<Region>{
        region(A::tree, P::ll, {raw(0, 16), raw(393216, 16), e_ll, raw(0, kMaxRanks)}),
        region(A::tree, P::ll128,
               {e_ll, raw(393216, 16), raw(4718592, 16), raw(18350080, 32), raw(40370176, 64), raw(57147392, 128),
                raw(72876032, 256), raw(96993280, 1024), raw(106430464, 2048), e_ll128}),
        region(A::ring, P::ll128,
               {raw(90701824, 128), raw(50855936, 64), raw(18350080, 32), raw(133693440, 32), raw(120061952, 64)}),
        region(A::nvls_tree, P::simple,
               {e_ll128, raw(106430464, 2048), raw(96993280, 1024), raw(72876032, 256), raw(57147392, 128),
                raw(40370176, 64), raw(18350080, 32), raw(50855936, 64), raw(90701824, 128), raw(120061952, 64),
                raw(133693440, 32), raw(18350080, 32), raw(4718592, 16), raw(kMaxBytes, 16), raw(435159040, 32),
                raw(1072693248, 64), raw(10737418240, 512), raw(34359738368, 1500), e_nvls}),
        region(A::ring, P::simple,
               {e_nvls, raw(10737418240, 512), raw(1072693248, 64), raw(435159040, 32), raw(kMaxBytes, 16)}),
    };
  }();
  return r;
}

const std::vector<Region>& p6_allgather() {
  static const std::vector<Region> r = [] {
    const Vertex e_ll = ext({74973184, 1024}, {213385216, 2048});
    const Vertex e_ll128 = ext({8321499136, 512}, {32212254720, 2048});
    return std::vector<Region>{
        region(A::ring, P::ll,
               {raw(0, 16), raw(786432, 16), raw(1572864, 32), raw(2621440, 64), raw(4718592, 128), raw(17301504, 256),
                raw(74973184, 1024), raw(213385216, 2048), e_ll, raw(0, kMaxRanks)}),
        region(A::ring, P::ll128,
               {e_ll, raw(213385216, 2048), raw(74973184, 1024), raw(17301504, 256), raw(4718592, 128),
                raw(2621440, 64), raw(1572864, 32), raw(786432, 16), raw(198705152, 16), raw(456130560, 32),
                raw(871366656, 64), raw(8321499136, 512), raw(32212254720, 2048), e_ll128}),
        region(A::ring, P::simple,
               {e_ll128, raw(32212254720, 2048), raw(8321499136, 512), raw(871366656, 64), raw(456130560, 32),
                raw(198705152, 16), raw(kMaxBytes, 16)}),
    };
  }();
  return r;
}

const std::vector<Region>& p6_reducescatter() {
  static const std::vector<Region> r = [] {
    const Vertex e_ll = ext({73924608, 1024}, {209190912, 2048});
    const Vertex e_ll128 = ext({4294967296, 256}, {8589934592, 512});
    return std::vector<Region>{
        region(A::ring, P::ll,
               {raw(0, 16), raw(786432, 16), raw(1572864, 32), raw(2621440, 64), raw(4718592, 128), raw(17301504, 256),
                raw(35127296, 512), raw(73924608, 1024), raw(209190912, 2048), e_ll, raw(0, kMaxRanks)}),
        region(A::ring, P::ll128,
               {e_ll, raw(209190912, 2048), raw(73924608, 1024), raw(35127296, 512), raw(17301504, 256),
                raw(4718592, 128), raw(2621440, 64), raw(1572864, 32), raw(786432, 16), raw(219676672, 16),
                raw(508559360, 32), raw(592445440, 64), raw(4294967296, 256), raw(8589934592, 512), e_ll128}),
        region(A::ring, P::simple,
               {e_ll128, raw(8589934592, 512), raw(4294967296, 256), raw(592445440, 64), raw(508559360, 32),
                raw(219676672, 16), raw(kMaxBytes, 16)}),
    };
  }();
  return r;
}

// p6-b300, 8 GPUs per node (region_init_internal_p6_b300).
const std::vector<Region>& p6_b300_allreduce() {
  static const std::vector<Region> r = [] {
    const Vertex e_ll = ext({360448, 1024}, {360448, 2048});
    const Vertex e_ll128 = ext({218103808, 1024}, {251658240, 2048});
    const Vertex e_nvls = ext({9663676416, 256}, {19327352832, 512});
    return std::vector<Region>{
        region(A::tree, P::ll,
               {raw(0, 16), raw(720896, 16), raw(491520, 32), raw(425984, 64), raw(425984, 128), raw(425984, 256),
                raw(360448, 512), raw(360448, 1024), raw(360448, 2048), e_ll, raw(0, kMaxRanks)}),
        region(A::tree, P::ll128,
               {e_ll, raw(360448, 2048), raw(360448, 1024), raw(360448, 512), raw(425984, 256), raw(425984, 128),
                raw(425984, 64), raw(491520, 32), raw(720896, 16), raw(31457280, 16), raw(54525952, 32),
                raw(109051904, 64), raw(125829120, 128), raw(125829120, 256), raw(184549376, 512),
                raw(218103808, 1024), raw(251658240, 2048), e_ll128}),
        region(A::ring, P::ll128,
               {raw(369098752, 128), raw(109051904, 64), raw(54525952, 32), raw(31457280, 16), raw(62914560, 16),
                raw(603979776, 32), raw(1006632960, 64), raw(1006632960, 128)}),
        region(A::nvls_tree, P::simple,
               {e_ll128, raw(251658240, 2048), raw(218103808, 1024), raw(184549376, 512), raw(125829120, 256),
                raw(125829120, 128), raw(109051904, 64), raw(369098752, 128), raw(1006632960, 128),
                raw(1006632960, 64), raw(603979776, 32), raw(62914560, 16), raw(kMaxBytes, 16), raw(603979776, 32),
                raw(2013265920, 64), raw(4026531840, 128), raw(9663676416, 256), raw(19327352832, 512), e_nvls}),
        region(A::ring, P::simple,
               {e_nvls, raw(19327352832, 512), raw(9663676416, 256), raw(4026531840, 128), raw(2013265920, 64),
                raw(603979776, 32), raw(kMaxBytes, 16)}),
    };
  }();
  return r;
}

// p6-b300's all-gather and reduce-scatter differ only in the LL128 / Simple edge at 16-64 ranks.
std::vector<Region> p6_b300_ring_regions(double edge16, double edge32, double edge64) {
  const Vertex e_ll = ext({109051904, 1024}, {218103808, 2048});
  const Vertex e_ll128 = ext({13958643712, 512}, {27917287424, 1024});
  return std::vector<Region>{
      region(A::ring, P::ll,
             {raw(0, 16), raw(1703936, 16), raw(3407872, 32), raw(6815744, 64), raw(13631488, 128), raw(27262976, 256),
              raw(54525952, 512), raw(109051904, 1024), raw(218103808, 2048), e_ll, raw(0, kMaxRanks)}),
      region(A::ring, P::ll128,
             {e_ll, raw(218103808, 2048), raw(109051904, 1024), raw(54525952, 512), raw(27262976, 256),
              raw(13631488, 128), raw(6815744, 64), raw(3407872, 32), raw(1703936, 16), raw(edge16, 16),
              raw(edge32, 32), raw(edge64, 64), raw(3489660928, 128), raw(6979321856, 256),
              raw(13958643712, 512), raw(27917287424, 1024), e_ll128}),
      region(A::ring, P::simple,
             {e_ll128, raw(27917287424, 1024), raw(13958643712, 512), raw(6979321856, 256), raw(3489660928, 128),
              raw(edge64, 64), raw(edge32, 32), raw(edge16, 16), raw(kMaxBytes, 16)}),
  };
}
const std::vector<Region>& p6_b300_allgather() {
  static const std::vector<Region> r = p6_b300_ring_regions(436207616, 872415232, 1744830464);
  return r;
}
const std::vector<Region>& p6_b300_reducescatter() {
  static const std::vector<Region> r = p6_b300_ring_regions(301989888, 738197504, 1207959552);
  return r;
}

const std::vector<Region>* regions_for(TunerPlugin plugin, NcclFunc f, int ranks_per_node) {
  if (ranks_per_node != 8) return nullptr;
  if (plugin == TunerPlugin::aws_ofi_p5) return f == NcclFunc::allreduce ? &p5_allreduce() : nullptr;
  if (plugin == TunerPlugin::aws_ofi_p5en) {
    switch (f) {
      case NcclFunc::allreduce: return &p5en_allreduce();
      case NcclFunc::allgather: return &p5en_allgather();
      case NcclFunc::reducescatter: return &p5en_reducescatter();
    }
  }
  if (plugin == TunerPlugin::aws_ofi_p6) {
    switch (f) {
      case NcclFunc::allreduce: return &p6_allreduce();
      case NcclFunc::allgather: return &p6_allgather();
      case NcclFunc::reducescatter: return &p6_reducescatter();
    }
  }
  if (plugin == TunerPlugin::aws_ofi_p6_b300) {
    switch (f) {
      case NcclFunc::allreduce: return &p6_b300_allreduce();
      case NcclFunc::allgather: return &p6_b300_allgather();
      case NcclFunc::reducescatter: return &p6_b300_reducescatter();
    }
  }
  return nullptr;
}

}  // namespace

std::optional<TunerPick> tuner_plugin_pick(TunerPlugin plugin, NcclFunc f, int nodes, int ranks_per_node,
                                           std::int64_t bytes, const std::function<bool(NcclAlgo, NcclProto)>& enabled) {
  if (plugin == TunerPlugin::none || nodes <= 2) return std::nullopt;
  // Beyond its limits the tuner falls back to NCCL's (TUNER_MAX_SIZE, TUNER_MAX_RANKS).
  const double ranks = static_cast<double>(nodes) * ranks_per_node;
  if (static_cast<double>(bytes) > kMaxBytes || ranks > kMaxRanks) return std::nullopt;
  const auto* regions = regions_for(plugin, f, ranks_per_node);
  if (regions == nullptr) return std::nullopt;
  const Point p = log2_point(static_cast<double>(bytes), ranks);
  for (const auto& r : *regions) {
    if (!enabled(r.algo, r.proto)) continue;
    if (inside(r, p)) return TunerPick{r.algo, r.proto};
  }
  return std::nullopt;
}

}  // namespace dionsim::sim
