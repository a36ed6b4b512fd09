#pragma once
// The calibration parameters, in one table: every parameter a calibration file may hold is named,
// given a unit, a valid range, where it lands in whatif's configuration (the kernel model's
// config or the step calibration), and — for those the step fit frees — its fit bounds and start.
// Reading a calibration (`whatif --calibration`), the step fit's evaluations and the calibration's
// own checks all go through this table, so a parameter is defined once.
//
// A family ("hbm_efficiency.<class>", "nccl_all_to_all_w<W>_algbw_GBps") is one row with a name
// pattern; its suffix (the kernel class, the world size) is passed to the row's apply.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/kernel_model.hpp"
#include "sim/whatif_calibration.hpp"

namespace dionsim::analysis {

// The valid values of a parameter (checked when a calibration is read).
enum class ParameterRange {
  efficiency,  // (0, 1]
  time,        // [0, ∞), finite
  factor,      // [1, ∞), finite
  throughput,  // (0, ∞), finite
  bounded,     // [valid_lower, valid_upper]
};

// Where a calibration applies: the GPU it was measured on (kernel times), or the GPU and the
// fabric (everything the network shapes).
enum class ParameterScope { hardware, fabric };

struct FitBounds {
  double lower = 0, upper = 0, start = 0;
};

using ApplyParameter = void (*)(double value, std::string_view suffix, sim::KernelCalibration& cal,
                                const sim::Hardware& base);

struct ParameterSpec {
  std::string_view name;    // exact name, or the fixed part of a family
  std::string_view suffix;  // "" for an exact name; the family's fixed tail ("_algbw_GBps"), or "*" for none
  std::string_view unit;
  ParameterRange range = ParameterRange::time;
  double valid_lower = 0, valid_upper = 0;  // for ParameterRange::bounded
  ParameterScope scope = ParameterScope::hardware;
  std::optional<FitBounds> fit;  // freed by the step fit (in table order), else only read
  ApplyParameter apply = nullptr;
  std::string_view meaning;
  [[nodiscard]] bool family() const { return !suffix.empty(); }
};

// Every parameter, in the step fit's order.
[[nodiscard]] const std::vector<ParameterSpec>& calibration_parameters();
// The row for a parameter name (a family's suffix in `*suffix`), or null for a name no row knows.
[[nodiscard]] const ParameterSpec* find_parameter(std::string_view name, std::string* suffix = nullptr);
// The family name for a suffix: parameter_name(spec, "pack") = "hbm_efficiency.pack".
[[nodiscard]] std::string parameter_name(const ParameterSpec& spec, std::string_view suffix = {});
// Checks a value against its row's range: InputError naming `where` and the parameter.
void check_parameter(const ParameterSpec& spec, const std::string& name, double value, const std::string& where);

// The GPU preset of a measured hardware label ("H100 SXM", "NVIDIA H200", "B200", "GB200", or a
// preset name) and the fabric preset a calibration of it models its runs on when nothing says
// otherwise (the measurement CSV has no fabric column): HGX GPUs their NDR400 preset, A100 HDR200,
// GB200/GB300 their NVL72 rack. nullopt for a label of no preset (a PCIe card, another GPU).
struct GpuPreset {
  std::string hardware;  // sim::hardware_preset name: "h100-sxm"
  std::string fabric;    // topologies preset: "h100-ndr400"
};
[[nodiscard]] std::optional<GpuPreset> gpu_preset_of(const std::string& hardware_label);
// The GPU label of a fabric preset's nodes ("p5-efa" -> "H100", "gb200-nvl72" -> "GB200"; an
// overridden "h100-ndr400@25" is h100-ndr400's), so that a calibration fitted on a fabric names
// the GPU it applies to; nullopt for a name no preset starts with.
[[nodiscard]] std::optional<std::string> gpu_label_of_fabric(const std::string& fabric_preset);
// "A100, H100, H200, B200, B300, GB200 or GB300 (SXM; a label containing one, e.g. 'NVIDIA H100 80GB HBM3')".
[[nodiscard]] std::string known_gpu_labels();

// NS-variant parameters: a kernel-rate parameter fitted for one NS variant only is named
// "<parameter>@<variant>" ("ns_gemm_efficiency@gram+triton", "hbm_efficiency.post@gram");
// the plain name holds for every variant without its own. The parameters a run of `ns_variant`
// uses: plain names, overridden by that variant's; other variants' dropped.
[[nodiscard]] std::map<std::string, double> parameters_for_ns(const std::map<std::string, double>& parameters,
                                                              const std::string& ns_variant);

// The fitted parameters of a `dionsim calibrate` file as a kernel calibration of whatif.
// `hardware_label` ("H200", "NVIDIA H200", "H100") must name the same GPU preset as `base`
// (InputError naming `name`, the field hardware and the GPU expected otherwise). Names no row
// knows, and variant parameters (resolve them first: parameters_for_ns), are listed in
// unused_parameters. The traced pair ns_gemm_isolated_tflops / ns_gemm_overlapped_tflops
// together set the NS GEMMs' overlap slowdown (isolated / overlapped throughput). `fabric`: the
// fabric preset the calibration was fitted on; its fabric-scoped parameters (ParameterScope)
// apply on that fabric only (StepCalibration::fabric; "" = every fabric).
[[nodiscard]] sim::KernelCalibration kernel_calibration_from_parameters(const std::string& name,
                                                                        const std::string& hardware_label,
                                                                        const std::map<std::string, double>& parameters,
                                                                        const sim::Hardware& base,
                                                                        const std::string& fabric = "");

}  // namespace dionsim::analysis
