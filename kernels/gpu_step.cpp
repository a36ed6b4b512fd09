#include "kernels/gpu_step.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <stdexcept>

#include "common/error.hpp"
#include "kernels/ops.hpp"

namespace dionsim::kernels {

namespace {

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// Phases per path (§1.7): the collective that ends each phase.
struct PhaseSpec {
  const char* collective;  // "" = none (last phase)
};
const std::vector<PhaseSpec>& phases_of(opt::Path p) {
  static const std::vector<PhaseSpec> local{{"a2a_fwd"}, {"a2a_rev"}, {""}};
  static const std::vector<PhaseSpec> global{{"a2a_fwd"}, {"a2a_rev"}, {""}};
  static const std::vector<PhaseSpec> capped{{"norms_allgather"}, {"a2a_fwd"}, {"a2a_rev"}, {""}};
  static const std::vector<PhaseSpec> ddp{{"ddp_allgather"}, {""}};
  static const std::vector<PhaseSpec> single{{""}};
  switch (p) {
    case opt::Path::local: return local;
    case opt::Path::global: return global;
    case opt::Path::capped_packed: return capped;
    case opt::Path::ddp: return ddp;
    case opt::Path::single: return single;
  }
  throw UsageError("GPU step: unknown path");
}

// Pool of timing events reused every step (no allocation inside step()).
class Marks {
 public:
  TimingEvent& next() {
    if (cursor_ == pool_.size()) pool_.push_back(std::make_unique<TimingEvent>());
    return *pool_[cursor_++];
  }
  void reset() { cursor_ = 0; }

 private:
  std::vector<std::unique_ptr<TimingEvent>> pool_;
  std::size_t cursor_ = 0;
};

}  // namespace

// One rank's buffers for one shape group.
struct RankGroup {
  std::int64_t L = 0;
  DeviceArray<float> W, G, V, keys, row_scale;
  DeviceArray<std::uint8_t> M;  // momentum bytes (fp32 or bf16)
  DeviceArray<std::int32_t> u_row;  // [N][L] local, capped: row of the reverse payload holding (m, r)'s update, -1 none
  DeviceArray<bf16_bits> send, recv, ns, nsin;
  DeviceArray<bf16_bits> rev;  // global: the reverse payload [w][pr][pl][C], all zero between steps
  DeviceArray<std::uint8_t> mask;
  DeviceArray<std::int32_t> index, count;
  // global (owner side)
  DeviceArray<float> akeys;
  DeviceArray<std::uint8_t> amask;
  DeviceArray<std::int32_t> aindex, acount;
  // capped
  DeviceArray<float> pnorms, gathered, gkeys, thresh;
  DeviceArray<std::uint8_t> winners;
  DeviceArray<std::int32_t> slot_src, route;
  std::unique_ptr<CappedScratch> scratch;
  std::unique_ptr<ColKeysScratch> col_scratch;  // unsharded column selection
  Event compute_done, coll_done;
  // Streams of this task: `aux` takes its memory-bound kernels (the compute stream in single-stream
  // mode), `cur` is where its last kernel went; `hop` orders a kernel after that one on another stream.
  StreamHandle aux = nullptr, cur = nullptr;
  Event hop;
};

struct RankCtx {
  int rank = 0, device = 0;
  StreamHandle compute = nullptr, comm = nullptr;
  std::vector<StreamHandle> aux;                 // overlap modes: one per in-flight task slot
  std::unique_ptr<Event> step_begin;             // the step's start on the compute stream
  std::vector<std::unique_ptr<Event>> aux_done;  // each aux stream's end of the step
  std::unique_ptr<NewtonSchulz> ns;
  DeviceArray<long long> stats;  // [winners, deferred] of the current step
  std::vector<std::unique_ptr<RankGroup>> groups;
  Marks marks;
  // timing records: (label, start index, end index) into the marks issued this step
  struct Span { std::string label; TimingEvent* start; TimingEvent* end; bool kernel; };
  std::vector<Span> spans;
  struct CollSpan { std::string name; std::int64_t group, bytes; TimingEvent* start; TimingEvent* end; };
  std::vector<CollSpan> coll_spans;
  TimingEvent* step_start = nullptr;
  TimingEvent* step_end = nullptr;
};

struct GpuOptimizer::Impl {
  opt::StepConfig cfg;
  std::vector<opt::ParamSpec> params;
  StepTransport& tr;
  bool timing;
  int max_in_flight;
  StreamMode streams;
  NsTuning ns_tuning;
  std::vector<opt::GroupPlan> plans;
  std::vector<std::vector<std::size_t>> members;
  std::vector<RankCtx> ranks;
  MomentumDtype mdt;
  std::uint64_t steps_done = 0;
  StreamGraph graph;  // capture() / replay()
  std::size_t current_group = 0;  // the group run_phase is issuing (timing labels)

  Impl(const opt::StepConfig& c, std::vector<opt::ParamSpec> p, StepTransport& t, bool tm, int mif, StreamMode sm,
       NsTuning tune)
      : cfg(c), params(std::move(p)), tr(t), timing(tm), max_in_flight(mif), streams(sm), ns_tuning(tune),
        mdt(c.dtype == opt::Dtype::bfloat16 ? MomentumDtype::bf16 : MomentumDtype::fp32) {}

  [[nodiscard]] std::int64_t w() const { return cfg.plan.world; }
  // FSDP2 rows of this rank; unsharded paths (ddp, single) hold every row on every rank.
  std::int64_t rows_of(const opt::GroupPlan& g, int rank) const {
    if (unsharded(g)) return g.rows;
    return std::clamp<std::int64_t>(g.rows - rank * g.pl, 0, g.pl);
  }
  static bool unsharded(const opt::GroupPlan& g) { return g.path == opt::Path::ddp || g.path == opt::Path::single; }
  // First global row of this rank's rows.
  std::int64_t row0_of(const opt::GroupPlan& g, int rank) const { return unsharded(g) ? 0 : rank * g.pl; }
  std::size_t mbytes() const { return mdt == MomentumDtype::bf16 ? 2 : 4; }

  void plan_groups() {
    if (cfg.plan.world != tr.world())
      throw_bad_usage("--world", std::to_string(cfg.plan.world), "the transport's world " + std::to_string(tr.world()));
    std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> index;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto key = std::make_pair(params[i].rows, params[i].cols);
      auto it = index.find(key);
      if (it == index.end()) {
        index.emplace(key, members.size());
        members.push_back({i});
      } else {
        members[it->second].push_back(i);
      }
    }
    const opt::PlanConfig pc = cfg.plan_config();
    opt::validate(pc);
    for (const auto& m : members) {
      const auto& p = params[m.front()];
      plans.push_back(opt::plan_group(p.rows, p.cols, static_cast<std::int64_t>(m.size()), pc));
      if (!plans.back().select_rows && !unsharded(plans.back()))
        throw UsageError("GPU step: column selection on a sharded path is not implemented");  // the plan never makes one
    }
  }

  void allocate() {
    for (int l = 0; l < tr.local_ranks(); ++l) {
      RankCtx& rc = ranks.emplace_back();
      rc.rank = tr.rank(l);
      rc.device = tr.device(l);
      set_device(rc.device);
      set_error_rank(rc.rank);
      rc.compute = create_stream(streams == StreamMode::overlap_ns_first ? 1 : 0);
      rc.comm = tr.comm_stream(l);
      if (streams != StreamMode::single) {
        rc.step_begin = std::make_unique<Event>();
        // Tasks active together get distinct slots (gi mod slots) whenever they are consecutive
        // groups; sharing one only serializes them.
        const std::size_t slots = std::min<std::size_t>(static_cast<std::size_t>(max_in_flight), plans.size());
        for (std::size_t i = 0; i < slots; ++i) {
          rc.aux.push_back(create_stream(streams == StreamMode::overlap_aux_first ? 1 : 0));
          rc.aux_done.push_back(std::make_unique<Event>());
        }
      }
      rc.ns = std::make_unique<NewtonSchulz>(cfg.plan.ns == opt::NsKind::polar_express ? NsKind::polar_express
                                             : cfg.plan.ns == opt::NsKind::gram        ? NsKind::gram
                                                                                  : NsKind::quintic,
                                             static_cast<float>(cfg.epsilon));
      rc.ns->set_autotune(ns_tuning.autotune);
      rc.ns->set_symmetric_layout(ns_tuning.layout);
      rc.stats = DeviceArray<long long>(2, "capped stats");
      for (const auto& g : plans) {
        auto rg = std::make_unique<RankGroup>();
        const std::int64_t N = g.N, C = g.cols, L = rows_of(g, rc.rank), pr = g.pr, W = w();
        rg->L = L;
        rg->aux = rg->cur = rc.aux.empty() ? rc.compute : rc.aux[rc.groups.size() % rc.aux.size()];
        const auto NLC = at(N * L * C);
        rg->W = DeviceArray<float>(NLC, "W");
        rg->G = DeviceArray<float>(NLC, "G");
        rg->M = DeviceArray<std::uint8_t>(NLC * mbytes(), "momentum");
        memset_device(rg->M.data(), 0, rg->M.bytes(), rc.compute);
        rg->keys = DeviceArray<float>(at(N * L), "keys");
        if (cfg.plan.optimizer == opt::OptimizerKind::nordion2) {
          rg->V = DeviceArray<float>(at(N * L), "variance_neuron");
          memset_device(rg->V.data(), 0, rg->V.bytes(), rc.compute);
          rg->row_scale = DeviceArray<float>(at(N * L), "row scale");
        }
        if (unsharded(g)) {
          // Selection along S = rows (row selection) or columns; the selected rows or columns are
          // gathered as [Np][k][ns width] (columns transposed: their wide form), virtual matrices zero.
          const std::int64_t S = g.select_rows ? L : C, width = g.select_rows ? C : L;
          rg->keys = DeviceArray<float>(at(N * S), "unsharded keys");
          rg->mask = DeviceArray<std::uint8_t>(at(N * S), "unsharded mask");
          rg->index = DeviceArray<std::int32_t>(at(N * S), "unsharded index");
          rg->count = DeviceArray<std::int32_t>(at(N), "unsharded count");
          rg->send = DeviceArray<bf16_bits>(at(g.Np * g.k * width), "unsharded selected");
          memset_device(rg->send.data(), 0, rg->send.bytes(), rc.compute);
          if (g.path == opt::Path::ddp) rg->recv = DeviceArray<bf16_bits>(at(g.Np * g.k * width), "ddp gathered");
          rg->u_row = DeviceArray<std::int32_t>(at(N * S), "unsharded post map");
          if (!g.select_rows) rg->col_scratch = std::make_unique<ColKeysScratch>(static_cast<int>(N), L, C);
        } else if (g.path == opt::Path::local) {
          rg->mask = DeviceArray<std::uint8_t>(at(N * L), "local mask");
          rg->index = DeviceArray<std::int32_t>(at(N * L), "local index");
          rg->count = DeviceArray<std::int32_t>(at(N), "local count");
          rg->send = DeviceArray<bf16_bits>(at(g.Np * g.k * C), "local send");
          memset_device(rg->send.data(), 0, rg->send.bytes(), rc.compute);  // virtual matrices stay zero
          rg->recv = DeviceArray<bf16_bits>(at(g.Np * g.k * C), "local recv");
          rg->ns = DeviceArray<bf16_bits>(at(pr * g.kw * C), "local ns");
          rg->u_row = DeviceArray<std::int32_t>(at(N * L), "local post row map");
        } else if (g.path == opt::Path::global) {
          rg->send = DeviceArray<bf16_bits>(at(g.Np * g.pl * C), "global send");
          memset_device(rg->send.data(), 0, rg->send.bytes(), rc.compute);
          rg->recv = DeviceArray<bf16_bits>(at(g.Np * g.pl * C), "global recv");
          rg->rev = DeviceArray<bf16_bits>(at(g.Np * g.pl * C), "global reverse payload");
          memset_device(rg->rev.data(), 0, rg->rev.bytes(), rc.compute);
          rg->gkeys = DeviceArray<float>(at(g.Np * g.pl), "global keys (received order)");
          rg->nsin = DeviceArray<bf16_bits>(at(pr * g.k_tot * C), "global ns input");
          rg->akeys = DeviceArray<float>(at(pr * W * g.pl), "global keys");
          rg->amask = DeviceArray<std::uint8_t>(at(pr * W * g.pl), "global mask");
          rg->aindex = DeviceArray<std::int32_t>(at(pr * W * g.pl), "global index");
          rg->acount = DeviceArray<std::int32_t>(at(pr), "global count");
        } else {  // capped_packed
          rg->pnorms = DeviceArray<float>(at(N * g.pl), "capped padded norms");
          rg->gathered = DeviceArray<float>(at(W * N * g.pl), "capped gathered norms");
          rg->gkeys = DeviceArray<float>(at(W * N * g.pl), "capped keys");
          rg->thresh = DeviceArray<float>(at(N), "capped thresholds");
          rg->winners = DeviceArray<std::uint8_t>(at(W * N * g.pl), "capped winners");
          rg->send = DeviceArray<bf16_bits>(at(W * (1 + g.B) * C), "capped send");
          rg->recv = DeviceArray<bf16_bits>(at(W * (1 + g.B) * C), "capped recv");
          rg->ns = DeviceArray<bf16_bits>(at(pr * g.kw * C), "capped ns");
          rg->slot_src = DeviceArray<std::int32_t>(at(W * g.B), "capped slot map");
          rg->route = DeviceArray<std::int32_t>(at(W * g.B), "capped route");
          rg->u_row = DeviceArray<std::int32_t>(at(N * L), "capped post row map");
          rg->scratch = std::make_unique<CappedScratch>(shape(g, rc.rank));
        }
        const NsInput in = ns_input(g);
        rc.ns->reserve(in.batch, in.rows, in.cols);
        rc.groups.push_back(std::move(rg));
      }
      kernels::synchronize(rc.compute);
    }
  }

  [[nodiscard]] CappedShape shape(const opt::GroupPlan& g, int rank) const {
    return CappedShape{static_cast<int>(w()), rank, static_cast<int>(g.N), static_cast<int>(g.pr), g.pl,
                       rows_of(g, rank), g.cols, g.k_tot, g.kw, g.B};
  }

  PostParams post_params(const opt::GroupPlan& g) const {
    PostParams p;
    p.lr = static_cast<float>(cfg.lr);
    p.weight_decay = static_cast<float>(cfg.weight_decay);
    const double R = static_cast<double>(g.rows), C = static_cast<double>(g.cols);
    switch (cfg.adjust_lr) {
      case opt::AdjustLr::none: p.adjusted_lr = p.lr; break;
      case opt::AdjustLr::spectral_norm: p.adjusted_lr = p.lr * static_cast<float>(std::sqrt(R / C)); break;
      case opt::AdjustLr::rms_norm: p.adjusted_lr = p.lr * 0.2F * static_cast<float>(std::sqrt(std::max(R, C))); break;
    }
    p.param_bf16 = mdt == MomentumDtype::bf16;
    return p;
  }

  // Continues task `rg`'s kernel sequence on stream `s`: orders it after the task's last kernel.
  static void move_to(RankGroup& rg, StreamHandle s) {
    if (rg.cur == s) return;
    rg.hop.record(rg.cur);
    rg.hop.wait(s);
    rg.cur = s;
  }

  // Issues a kernel class of task `rg` on stream `s`, marking its span there (timing only).
  template <class F>
  void timed(RankCtx& rc, RankGroup& rg, const std::string& label, StreamHandle s, F&& issue) {
    move_to(rg, s);
    if (!timing) { issue(); return; }
    TimingEvent& a = rc.marks.next();
    a.record(s);
    issue();
    TimingEvent& b = rc.marks.next();
    b.record(s);
    rc.spans.push_back({label, &a, &b, true});
    if (label == "ns_gemm") rc.spans.push_back({"ns_gemm/group" + std::to_string(current_group), &a, &b, false});
  }

  // ---- compute of one phase on one rank ----
  void compute_phase(RankCtx& rc, std::size_t gi, int phase) {
    const opt::GroupPlan& g = plans[gi];
    RankGroup& rg = *rc.groups[gi];
    const StreamHandle s = rg.aux, gemm = rc.compute;  // memory-bound kernels, NS GEMMs
    const int N = static_cast<int>(g.N), pr = static_cast<int>(g.pr), W = static_cast<int>(w());
    const std::int64_t C = g.cols, L = rg.L;
    const bool nordion = cfg.plan.optimizer == opt::OptimizerKind::nordion2;
    // U [N][u_rows][C], or with u_row the rows of a receive buffer named by the row map.
    auto post = [&](const bf16_bits* U, std::int64_t u_rows, const std::int32_t* u_row, float ef, bool round_update) {
      PostParams p = post_params(g);
      p.ef = ef;
      p.round_update_bf16 = round_update;
      if (nordion)
        timed(rc, rg, "normalize", s, [&] {
          nordion2_row_scale(U, N, L, u_rows, C, rg.V.data(), static_cast<float>(cfg.muon_beta2), rg.row_scale.data(), s,
                             mdt == MomentumDtype::bf16, u_row);
        });
      timed(rc, rg, "post", s, [&] {
        masked_post(rg.W.data(), rg.M.data(), mdt, U, nordion ? rg.row_scale.data() : nullptr, N, L, u_rows, C, p, s,
                    u_row);
      });
    };
    if (g.path == opt::Path::local) {
      if (phase == 0) {
        timed(rc, rg, "momentum_norms", s,
              [&] { accumulate_row_l1(rg.G.data(), rg.M.data(), mdt, N * L, C, rg.keys.data(), s); });
        timed(rc, rg, "select", s, [&] {
          stable_topk_mask(rg.keys.data(), N, L, std::min(g.k, L), rg.mask.data(), nullptr, s);
          compact_mask(rg.mask.data(), N, L, rg.index.data(), rg.count.data(), s);
        });
        timed(rc, rg, "gather_rows", s, [&] {  // pre-decay bf16 copy + EF decay of the selected rows, one pass
          gather_rows_bf16(rg.M.data(), mdt, rg.index.data(), rg.count.data(), N, L, g.k, C, rg.send.data(), s,
                           static_cast<float>(cfg.ef));
        });
      } else if (phase == 1) {
        timed(rc, rg, "assemble", s, [&] { interleave_blocks(rg.recv.data(), W, pr, g.k, C, rg.ns.data(), s); });
        timed(rc, rg, "ns_gemm", gemm, [&] { rc.ns->run(rg.ns.data(), pr, g.kw, C, gemm); });
        timed(rc, rg, "repack", s, [&] { deinterleave_blocks(rg.ns.data(), W, pr, g.k, C, rg.send.data(), s); });
      } else {
        // The post reads matrix m's t-th selected row where it came back (row m*k + t): no scatter.
        timed(rc, rg, "row_map", s, [&] {
          row_map_from_index(rg.index.data(), rg.count.data(), N, L, g.k, rg.u_row.data(), s);
        });
        // EF was applied before the a2a; indexed post: no bf16 rounding of the update.
        post(rg.recv.data(), L, rg.u_row.data(), 1.0F, false);
      }
    } else if (g.path == opt::Path::global) {
      if (phase == 0) {
        // M += G fused with the bf16 copy into the padded payload [Np][pl][C] (pad rows and virtual
        // matrices stay zero: zeroed at allocation, and NS keeps zero rows zero on the way back).
        timed(rc, rg, "momentum_norms", s, [&] {
          accumulate_row_l1_copy(rg.G.data(), rg.M.data(), mdt, N, L, g.pl, C, rg.keys.data(), rg.send.data(), s);
        });
      } else if (phase == 1) {
        // The owner reads its assembled matrices straight from the received [w][pr][pl][C] blocks.
        const std::int64_t Sp = W * g.pl;
        timed(rc, rg, "norms", s, [&] {
          row_l1_bf16(rg.recv.data(), g.Np * g.pl, C, rg.gkeys.data(), s);             // [w][pr][pl]
          gather_to_matrix_major(rg.gkeys.data(), W, pr, g.pl, rg.akeys.data(), s);    // [pr][w*pl]
        });
        timed(rc, rg, "select", s, [&] {
          stable_topk_mask(rg.akeys.data(), pr, Sp, g.k_tot, rg.amask.data(), nullptr, s);
          compact_mask(rg.amask.data(), pr, Sp, rg.aindex.data(), rg.acount.data(), s);
        });
        timed(rc, rg, "gather_rows", s, [&] {
          gather_rows_blocked(rg.recv.data(), rg.aindex.data(), rg.acount.data(), W, pr, g.pl, g.k_tot, C, rg.nsin.data(), s);
        });
        timed(rc, rg, "ns_gemm", gemm, [&] { rc.ns->run(rg.nsin.data(), pr, g.k_tot, C, gemm); });
        // Into the reverse payload, which is zero except where this step writes (no full memset).
        timed(rc, rg, "scatter", s, [&] {
          scatter_rows_blocked(rg.nsin.data(), rg.aindex.data(), rg.acount.data(), W, pr, g.pl, g.k_tot, C,
                               rg.rev.data(), s, /*zero_first=*/false);
        });
      } else {
        post(rg.recv.data(), g.pl, nullptr, static_cast<float>(cfg.ef), true);
        timed(rc, rg, "scatter", s, [&] {  // the reverse a2a has sent it: clear the rows written above
          scatter_rows_blocked(nullptr, rg.aindex.data(), rg.acount.data(), W, pr, g.pl, g.k_tot, C, rg.rev.data(), s,
                               /*zero_first=*/false);
        });
      }
    } else if (unsharded(g)) {
      // §3.4: every rank selects on its replica (EF decay of the selected rows / columns with the
      // pre-decay bf16 copy, one pass), orthogonalizes all matrices (single) or its own pr (ddp; the
      // all-gather then brings the others'), and applies the indexed post to every matrix.
      const std::int64_t R = L, S = g.select_rows ? R : C, width = g.select_rows ? C : R;
      const bool ddp = g.path == opt::Path::ddp;
      if (phase == 0) {
        if (g.select_rows) {
          timed(rc, rg, "momentum_norms", s,
                [&] { accumulate_row_l1(rg.G.data(), rg.M.data(), mdt, N * R, C, rg.keys.data(), s); });
        } else {
          timed(rc, rg, "momentum_norms", s, [&] {
            accumulate_col_l1(rg.G.data(), rg.M.data(), mdt, N, R, C, rg.keys.data(), *rg.col_scratch, s);
          });
        }
        timed(rc, rg, "select", s, [&] {
          stable_topk_mask(rg.keys.data(), N, S, g.k, rg.mask.data(), nullptr, s);
          compact_mask(rg.mask.data(), N, S, rg.index.data(), rg.count.data(), s);
        });
        timed(rc, rg, "gather_rows", s, [&] {
          if (g.select_rows)
            gather_rows_bf16(rg.M.data(), mdt, rg.index.data(), rg.count.data(), N, R, g.k, C, rg.send.data(), s,
                             static_cast<float>(cfg.ef));
          else
            gather_cols_bf16(rg.M.data(), mdt, rg.index.data(), rg.count.data(), N, R, C, g.k, rg.send.data(), s,
                             static_cast<float>(cfg.ef));
        });
        bf16_bits* own = rg.send.data() + (ddp ? static_cast<std::int64_t>(rc.rank) * pr * g.k * width : 0);
        timed(rc, rg, "ns_gemm", gemm, [&] { rc.ns->run(own, ddp ? pr : N, g.k, width, gemm); });
        if (ddp) return;
      }
      const bf16_bits* U = ddp ? rg.recv.data() : rg.send.data();
      timed(rc, rg, "row_map", s, [&] { row_map_from_index(rg.index.data(), rg.count.data(), N, S, g.k, rg.u_row.data(), s); });
      if (g.select_rows) {
        post(U, R, rg.u_row.data(), 1.0F, false);  // EF was applied by the gather; indexed post: no bf16 rounding
      } else {
        timed(rc, rg, "post", s, [&] { post_cols(rg.W.data(), U, rg.u_row.data(), N, R, C, post_params(g), s); });
      }
    } else {  // capped_packed
      const CappedShape sh = shape(g, rc.rank);
      if (phase == 0) {
        timed(rc, rg, "momentum_norms", s,
              [&] { accumulate_row_l1(rg.G.data(), rg.M.data(), mdt, N * L, C, rg.keys.data(), s); });
        timed(rc, rg, "pad_norms", s, [&] { pad_norms(rg.keys.data(), N, L, g.pl, rg.pnorms.data(), s); });
      } else if (phase == 1) {
        timed(rc, rg, "select", s, [&] {
          gather_to_matrix_major(rg.gathered.data(), W, N, g.pl, rg.gkeys.data(), s);
          stable_topk_mask(rg.gkeys.data(), N, W * g.pl, g.k_tot, rg.winners.data(), rg.thresh.data(), s);
        });
        timed(rc, rg, "pack", s, [&] {
          capped_pack(sh, rg.M.data(), mdt, rg.keys.data(), rg.winners.data(), rg.thresh.data(), *rg.scratch,
                      rg.send.data(), rg.slot_src.data(), rc.stats.data(), s);
        });
      } else if (phase == 2) {
        timed(rc, rg, "assemble", s, [&] {
          capped_route(sh, rg.recv.data(), rg.route.data(), s);
          capped_assemble(sh, rg.recv.data(), rg.route.data(), rg.ns.data(), s);
        });
        timed(rc, rg, "ns_gemm", gemm, [&] { rc.ns->run(rg.ns.data(), pr, g.kw, C, gemm); });
        timed(rc, rg, "repack", s, [&] { capped_repack(sh, rg.ns.data(), rg.route.data(), rg.send.data(), s); });
      } else {
        // §4.8's unpack inverted into a row map: the post reads each row's update from its slot.
        timed(rc, rg, "row_map", s, [&] {
          row_map_from_slots(rg.slot_src.data(), W * g.B, static_cast<std::int64_t>(N) * L, rg.u_row.data(), s);
        });
        post(rg.recv.data(), L, rg.u_row.data(), static_cast<float>(cfg.ef), true);
      }
    }
  }

  // ---- the collective that ends a phase, for all local ranks ----
  void collective(std::size_t gi, int phase) {
    const opt::GroupPlan& g = plans[gi];
    const std::string name = phases_of(g.path)[static_cast<std::size_t>(phase)].collective;
    const auto W = static_cast<std::size_t>(w());
    const auto C = static_cast<std::size_t>(g.cols);
    std::vector<const void*> send;
    std::vector<void*> recv;
    std::size_t count = 0;
    WireType t = WireType::bf16;
    for (auto& rc : ranks) {
      RankGroup& rg = *rc.groups[gi];
      if (name == "norms_allgather") {
        send.push_back(rg.pnorms.data());
        recv.push_back(rg.gathered.data());
        count = static_cast<std::size_t>(g.N * g.pl);
        t = WireType::fp32;
      } else if (name == "ddp_allgather") {  // each rank's pr orthogonalized matrices
        const std::size_t sub = static_cast<std::size_t>(g.k * (g.select_rows ? g.cols : g.rows));
        count = static_cast<std::size_t>(g.pr) * sub;
        send.push_back(rg.send.data() + static_cast<std::size_t>(rc.rank) * count);
        recv.push_back(rg.recv.data());
      } else {
        const bool global_rev = g.path == opt::Path::global && name == "a2a_rev";
        send.push_back(global_rev ? rg.rev.data() : rg.send.data());
        recv.push_back(rg.recv.data());
        if (g.path == opt::Path::local) count = static_cast<std::size_t>(g.pr * g.k) * C;
        else if (g.path == opt::Path::global) count = static_cast<std::size_t>(g.pr * g.pl) * C;
        else count = static_cast<std::size_t>(name == "a2a_fwd" ? 1 + g.B : g.B) * C;
      }
    }
    for (auto& rc : ranks) {
      set_device(rc.device);
      rc.groups[gi]->compute_done.record(rc.groups[gi]->cur);
    }
    for (auto& rc : ranks) {
      set_device(rc.device);
      for (auto& other : ranks)  // loopback: one comm stream reads every rank's buffers
        if (other.comm == rc.comm) other.groups[gi]->compute_done.wait(rc.comm);
    }
    std::vector<TimingEvent*> starts;
    if (timing)
      for (auto& rc : ranks) {
        set_device(rc.device);
        starts.push_back(&rc.marks.next());
        starts.back()->record(rc.comm);
      }
    if (!ranks.empty()) set_device(ranks.front().device);
    if (name == "norms_allgather" || name == "ddp_allgather") tr.all_gather(send, recv, count, t);
    else tr.all_to_all(send, recv, count, t);
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      RankCtx& rc = ranks[i];
      set_device(rc.device);
      rc.groups[gi]->coll_done.record(rc.comm);
      if (timing) {
        TimingEvent& end = rc.marks.next();
        end.record(rc.comm);
        const auto bytes =
            static_cast<std::int64_t>(count * wire_bytes(t) * (name == "norms_allgather" || name == "ddp_allgather" ? 1 : W));
        rc.coll_spans.push_back({name, static_cast<std::int64_t>(gi), bytes, starts[i], &end});
      }
    }
  }

  // Runs phase `phase` of task `gi` on every local rank; returns true when the task is finished.
  bool run_phase(std::size_t gi, int phase) {
    const auto& ph = phases_of(plans[gi].path);
    current_group = gi;
    for (auto& rc : ranks) {
      set_device(rc.device);
      set_error_rank(rc.rank);
      RankGroup& rg = *rc.groups[gi];
      if (phase > 0) {  // every phase starts with memory-bound kernels
        rg.coll_done.wait(rg.aux);
        rg.cur = rg.aux;
      }
      TimingEvent* a = nullptr;
      if (timing) { a = &rc.marks.next(); a->record(rg.cur); }
      compute_phase(rc, gi, phase);
      if (timing) {
        TimingEvent& b = rc.marks.next();
        b.record(rg.cur);
        rc.spans.push_back({"group" + std::to_string(gi) + "/P" + std::to_string(phase), a, &b, false});
      }
    }
    if (*ph[static_cast<std::size_t>(phase)].collective != '\0') collective(gi, phase);
    return static_cast<std::size_t>(phase) + 1 == ph.size();
  }

  void step() {
    for (auto& rc : ranks) {
      set_device(rc.device);
      rc.marks.reset();
      rc.spans.clear();
      rc.coll_spans.clear();
      if (timing) { rc.step_start = &rc.marks.next(); rc.step_start->record(rc.compute); }
      memset_device(rc.stats.data(), 0, rc.stats.bytes(), rc.compute);
      if (!rc.aux.empty()) {  // aux streams start after everything before the step (and the memset)
        rc.step_begin->record(rc.compute);
        for (StreamHandle a : rc.aux) rc.step_begin->wait(a);
      }
      for (auto& rg : rc.groups) rg->cur = rg->aux;
    }
    // AsyncRuntime (§1.7): admit one new task per round while fewer than max_in_flight are active,
    // newest first, then advance every active task by one phase.
    struct Task { std::size_t group; int phase; };
    std::deque<std::size_t> pending;
    for (std::size_t gi = 0; gi < plans.size(); ++gi) pending.push_back(gi);
    std::vector<Task> active;
    while (!pending.empty() || !active.empty()) {
      std::vector<Task> next;
      if (!pending.empty() && static_cast<int>(active.size()) < max_in_flight) {
        Task t{pending.front(), 0};
        pending.pop_front();
        if (!run_phase(t.group, t.phase)) next.push_back({t.group, 1});
      }
      for (const Task& t : active)
        if (!run_phase(t.group, t.phase)) next.push_back({t.group, t.phase + 1});
      active = std::move(next);
    }
    for (auto& rc : ranks) {
      set_device(rc.device);
      for (std::size_t i = 0; i < rc.aux.size(); ++i) {  // the compute stream ends after every aux stream
        rc.aux_done[i]->record(rc.aux[i]);
        rc.aux_done[i]->wait(rc.compute);
      }
      if (timing) { rc.step_end = &rc.marks.next(); rc.step_end->record(rc.compute); }
    }
    ++steps_done;
  }
};

GpuOptimizer::GpuOptimizer(const opt::StepConfig& config, std::vector<opt::ParamSpec> params, StepTransport& transport,
                           bool timing, int max_in_flight, StreamMode streams, NsTuning ns_tuning)
    : impl_(std::make_unique<Impl>(config, std::move(params), transport, timing, max_in_flight, streams, ns_tuning)) {
  if (max_in_flight < 1) throw_bad_usage("max_in_flight", std::to_string(max_in_flight), "an integer >= 1");
  impl_->plan_groups();
  impl_->allocate();
}

GpuOptimizer::~GpuOptimizer() {
  for (auto& rc : impl_->ranks) {
    set_device(rc.device);
    try {
      for (StreamHandle a : rc.aux) kernels::synchronize(a);
      kernels::synchronize(rc.compute);
      kernels::synchronize(rc.comm);
    } catch (...) {  // destructor: never throw; buffers are freed regardless
    }
    rc.groups.clear();
    rc.ns.reset();
    for (StreamHandle a : rc.aux) destroy_stream(a);
    destroy_stream(rc.compute);
  }
}

namespace {
// Rows [rank*pl, rank*pl + L) of a full [rows, C] matrix.
void upload_shard(const std::vector<float>& full, std::int64_t row0, std::int64_t L, std::int64_t C, float* dst) {
  if (L > 0) copy_to_device(dst, full.data() + row0 * C, static_cast<std::size_t>(L * C) * sizeof(float));
}
}  // namespace

void GpuOptimizer::set_weights(const std::vector<std::vector<float>>& full) {
  auto& im = *impl_;
  for (auto& rc : im.ranks) {
    set_device(rc.device);
    for (std::size_t gi = 0; gi < im.plans.size(); ++gi) {
      const auto& g = im.plans[gi];
      RankGroup& rg = *rc.groups[gi];
      for (std::size_t m = 0; m < im.members[gi].size(); ++m) {
        const auto& W = full.at(im.members[gi][m]);
        if (static_cast<std::int64_t>(W.size()) != g.rows * g.cols)
          throw InputError("set_weights: param " + im.params[im.members[gi][m]].name + ": wrong element count");
        std::vector<float> shard(static_cast<std::size_t>(rg.L * g.cols));
        std::copy_n(W.begin() + im.row0_of(g, rc.rank) * g.cols, shard.size(), shard.begin());
        if (im.mdt == MomentumDtype::bf16)
          for (auto& x : shard) x = round_bf16(x);  // bf16 parameters: values representable in bf16
        upload_shard(shard, 0, rg.L, g.cols, rg.W.data() + m * rg.L * g.cols);
      }
    }
  }
}

void GpuOptimizer::set_grads(const std::vector<std::vector<float>>& full) {
  auto& im = *impl_;
  for (auto& rc : im.ranks) {
    set_device(rc.device);
    for (std::size_t gi = 0; gi < im.plans.size(); ++gi) {
      const auto& g = im.plans[gi];
      RankGroup& rg = *rc.groups[gi];
      for (std::size_t m = 0; m < im.members[gi].size(); ++m)
        upload_shard(full.at(im.members[gi][m]), im.row0_of(g, rc.rank), rg.L, g.cols, rg.G.data() + m * rg.L * g.cols);
    }
  }
}

void GpuOptimizer::randomize_grads(std::uint64_t seed, float scale) {
  auto& im = *impl_;
  for (auto& rc : im.ranks) {
    set_device(rc.device);
    for (std::size_t gi = 0; gi < im.plans.size(); ++gi) {
      RankGroup& rg = *rc.groups[gi];
      fill_random(rg.G.data(), static_cast<std::int64_t>(rg.G.size()),
                  seed * 1000003ULL + im.steps_done * 7919ULL + static_cast<std::uint64_t>(rc.rank) * 131ULL + gi, scale,
                  rc.compute);
    }
  }
}

void GpuOptimizer::randomize_weights(std::uint64_t seed, float scale) {
  auto& im = *impl_;
  for (auto& rc : im.ranks) {
    set_device(rc.device);
    for (std::size_t gi = 0; gi < im.plans.size(); ++gi) {
      RankGroup& rg = *rc.groups[gi];
      fill_random(rg.W.data(), static_cast<std::int64_t>(rg.W.size()),
                  ~seed * 31ULL + static_cast<std::uint64_t>(rc.rank) * 131ULL + gi, scale, rc.compute);
    }
  }
}

void GpuOptimizer::step() { impl_->step(); }

void GpuOptimizer::capture() {
  auto& im = *impl_;
  if (im.ranks.size() != 1)
    throw UsageError("GPU step: CUDA-graph capture needs one local rank (this process drives " +
                     std::to_string(im.ranks.size()) + "); start one process per GPU");
  RankCtx& rc = im.ranks.front();
  set_device(rc.device);
  set_error_rank(rc.rank);
  const bool timing = im.timing;
  im.timing = false;  // timing events recorded in a capture would only order streams, not time them
  im.graph.begin_capture(rc.compute);
  try {
    im.step();
  } catch (...) {
    try {
      im.graph.end_capture(rc.compute);
    } catch (...) {  // the original error is the one to report
    }
    im.timing = timing;
    throw;
  }
  im.graph.end_capture(rc.compute);
  im.timing = timing;
  --im.steps_done;  // capturing ran nothing
  for (auto& r : im.ranks) r.spans.clear(), r.coll_spans.clear(), r.step_start = r.step_end = nullptr;
}

void GpuOptimizer::replay() {
  auto& im = *impl_;
  if (!im.graph.ready()) throw UsageError("GPU step: replay() before capture()");
  RankCtx& rc = im.ranks.front();
  set_device(rc.device);
  rc.marks.reset();
  rc.spans.clear();
  rc.coll_spans.clear();
  rc.step_start = rc.step_end = nullptr;
  if (im.timing) {  // marks outside the graph: the step's time only, no per-kernel spans
    rc.step_start = &rc.marks.next();
    rc.step_start->record(rc.compute);
  }
  im.graph.launch(rc.compute);
  if (im.timing) {
    rc.step_end = &rc.marks.next();
    rc.step_end->record(rc.compute);
  }
  ++im.steps_done;
}

std::size_t GpuOptimizer::graph_nodes() const { return impl_->graph.nodes(); }

std::vector<double> GpuOptimizer::ns_executed_flops() const {
  std::vector<double> out;
  for (const auto& g : impl_->plans) {
    const NsInput in = ns_input(g);
    out.push_back(impl_->ranks.front().ns->executed_flops(in.batch, in.rows, in.cols));
  }
  return out;
}

void GpuOptimizer::synchronize() {
  for (auto& rc : impl_->ranks) {
    set_device(rc.device);
    kernels::synchronize(rc.compute);
    kernels::synchronize(rc.comm);
  }
}

namespace {
template <class Fetch>
std::vector<float> gather_param(const GpuOptimizer::Impl& im, std::size_t param, Fetch fetch) {
  for (std::size_t gi = 0; gi < im.members.size(); ++gi)
    for (std::size_t m = 0; m < im.members[gi].size(); ++m) {
      if (im.members[gi][m] != param) continue;
      const auto& g = im.plans[gi];
      std::vector<float> full(static_cast<std::size_t>(g.rows * g.cols), 0.0F);
      for (const auto& rc : im.ranks) {
        set_device(rc.device);
        const RankGroup& rg = *rc.groups[gi];
        fetch(rg, m, full.data() + im.row0_of(g, rc.rank) * g.cols, rg.L * g.cols);
        if (GpuOptimizer::Impl::unsharded(g)) break;  // replicas: the first local rank's copy
      }
      return full;
    }
  throw std::out_of_range("GpuOptimizer: no param " + std::to_string(param));
}
}  // namespace

std::vector<float> GpuOptimizer::weight(std::size_t param) const {
  return gather_param(*impl_, param, [](const RankGroup& rg, std::size_t m, float* out, std::int64_t n) {
    if (n > 0) copy_to_host(out, rg.W.data() + static_cast<std::int64_t>(m) * n, static_cast<std::size_t>(n) * sizeof(float));
  });
}

std::vector<float> GpuOptimizer::momentum(std::size_t param) const {
  const bool bf16 = impl_->mdt == MomentumDtype::bf16;
  return gather_param(*impl_, param, [bf16](const RankGroup& rg, std::size_t m, float* out, std::int64_t n) {
    if (n <= 0) return;
    if (!bf16) {
      copy_to_host(out, rg.M.data() + static_cast<std::size_t>(static_cast<std::int64_t>(m) * n) * 4, static_cast<std::size_t>(n) * 4);
      return;
    }
    std::vector<bf16_bits> tmp(static_cast<std::size_t>(n));
    copy_to_host(tmp.data(), rg.M.data() + static_cast<std::size_t>(static_cast<std::int64_t>(m) * n) * 2, tmp.size() * 2);
    for (std::size_t i = 0; i < tmp.size(); ++i) out[i] = from_bf16(tmp[i]);
  });
}

std::vector<std::vector<std::int64_t>> GpuOptimizer::last_applied_rows() const {
  const auto& im = *impl_;
  std::vector<std::vector<std::int64_t>> out(im.params.size());
  for (const auto& rc : im.ranks) {
    set_device(rc.device);
    for (std::size_t gi = 0; gi < im.plans.size(); ++gi) {
      const auto& g = im.plans[gi];
      const RankGroup& rg = *rc.groups[gi];
      if (rg.L == 0) continue;
      if (GpuOptimizer::Impl::unsharded(g)) {  // the selected rows (or columns) of the first local rank's replica
        if (&rc != &im.ranks.front()) continue;
        const auto idx = rg.index.download(), cnt = rg.count.download();
        const std::int64_t S = g.select_rows ? g.rows : g.cols;
        for (std::int64_t m = 0; m < g.N; ++m)
          for (std::int32_t t = 0; t < cnt[static_cast<std::size_t>(m)]; ++t)
            out[im.members[gi][static_cast<std::size_t>(m)]].push_back(idx[static_cast<std::size_t>(m * S + t)]);
        continue;
      }
      // Applied rows = rows whose update row is nonzero (masked posts, §2.5; capped: the row of the
      // reverse payload the row map names); for local the selected rows (indexed post).
      std::vector<std::int32_t> idx, cnt, map;
      std::vector<bf16_bits> host;
      if (g.path == opt::Path::local) {
        idx = rg.index.download();
        cnt = rg.count.download();
      } else {
        host = rg.recv.download();
        if (g.path == opt::Path::capped_packed) map = rg.u_row.download();
      }
      auto update_row = [&](std::int64_t m, std::int64_t r) -> const bf16_bits* {
        if (map.empty()) return host.data() + (m * g.pl + r) * g.cols;  // global: [Np][pl][C]
        const std::int32_t i = map[static_cast<std::size_t>(m * rg.L + r)];
        return i < 0 ? nullptr : host.data() + static_cast<std::int64_t>(i) * g.cols;
      };
      for (std::int64_t m = 0; m < g.N; ++m) {
        auto& rows = out[im.members[gi][static_cast<std::size_t>(m)]];
        if (g.path == opt::Path::local) {
          for (std::int32_t t = 0; t < cnt[static_cast<std::size_t>(m)]; ++t)
            rows.push_back(rc.rank * g.pl + idx[static_cast<std::size_t>(m * rg.L + t)]);
          continue;
        }
        for (std::int64_t r = 0; r < rg.L; ++r) {
          const bf16_bits* u = update_row(m, r);
          if (u != nullptr && std::any_of(u, u + g.cols, [](bf16_bits b) { return (b & 0x7fffu) != 0; }))
            rows.push_back(rc.rank * g.pl + r);
        }
      }
    }
  }
  for (auto& r : out) std::sort(r.begin(), r.end());
  return out;
}

std::vector<opt::RankStepStats> GpuOptimizer::last_stats() const {
  std::vector<opt::RankStepStats> out;
  bool packed = false;
  for (const auto& g : impl_->plans) packed = packed || g.path == opt::Path::capped_packed;
  for (const auto& rc : impl_->ranks) {
    set_device(rc.device);
    const auto s = rc.stats.download();
    out.push_back({s[1], s[0], packed});
  }
  return out;
}

std::vector<StepTiming> GpuOptimizer::last_timing() const {
  std::vector<StepTiming> out;
  if (!impl_->timing) return out;
  for (const auto& rc : impl_->ranks)
    if (rc.step_start == nullptr || rc.step_end == nullptr) return out;  // a replay: nothing was timed
  for (const auto& rc : impl_->ranks) {
    set_device(rc.device);
    StepTiming t;
    t.step_ms = rc.step_end->ms_since(*rc.step_start);
    for (const auto& sp : rc.spans) (sp.kernel ? t.kernel_ms : t.phase_ms)[sp.label] += sp.end->ms_since(*sp.start);
    for (const auto& c : rc.coll_spans) t.collectives.push_back({c.name, c.group, c.bytes, c.end->ms_since(*c.start)});
    out.push_back(std::move(t));
  }
  return out;
}

NsInput ns_input(const opt::GroupPlan& g) {
  if (g.path == opt::Path::single || g.path == opt::Path::ddp)  // columns: their wide form [k][R]
    return {static_cast<int>(g.path == opt::Path::single ? g.N : g.pr), g.k, g.select_rows ? g.cols : g.rows};
  return {static_cast<int>(g.pr), g.path == opt::Path::global ? g.k_tot : g.kw, g.cols};
}

const std::vector<opt::GroupPlan>& GpuOptimizer::groups() const { return impl_->plans; }
std::vector<NsLayout> GpuOptimizer::ns_layouts() const {
  std::vector<NsLayout> out;
  for (const auto& g : impl_->plans) {
    const NsInput in = ns_input(g);
    out.push_back(impl_->ranks.front().ns->layout(in.batch, in.rows, in.cols));
  }
  return out;
}
const std::vector<std::vector<std::size_t>>& GpuOptimizer::group_params() const { return impl_->members; }

}  // namespace dionsim::kernels
