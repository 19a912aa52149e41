"""Which inference stack an estimate runs under: the one a user names, or the default of the
device's class -- the engine people actually run on that class.

A requested stack is resolved once, at the entry (CLI, dashboard, a core function taking a
stack name), into a :class:`Stack`; results carry it (name, label, whether it was the class
default, and why), so the CLI, every page and a link give the same figures for the same
scenario. ``None``, ``"default"`` and ``"auto"`` ask for the class default; ``"generic"`` is an
explicit choice of the stack-agnostic class fit (the reference values of the hardware class,
memory technology and architecture, with no stack profile applied: its error is wider, e.g.
it derates an H100 to about a fifth of its FP16 peak in prefill, where vLLM reaches several
times that). Any other name is a stack profile of :mod:`.efficiency`.

The defaults (``CLASS_DEFAULT_STACKS``) are by hardware class only, each with its reason:

* **datacenter GPUs -> vLLM**: the open-source serving engine most deployed on NVIDIA and AMD
  datacenter GPUs; it supports CUDA and ROCm (MI200/MI300 series) from one code base (vLLM
  documentation, "GPU installation": NVIDIA CUDA and AMD ROCm back ends; AMD's ROCm docs,
  "vLLM inference" on Instinct MI300X/MI325X). Its fitted profile covers both vendors here.
* **consumer GPUs, unified-memory SoCs, CPUs -> llama.cpp**: the engine under the usual local
  tools (Ollama and LM Studio run llama.cpp / GGUF; llama.cpp README: CUDA, HIP, Vulkan,
  Metal and CPU back ends), and the reference stack every class of this model was fitted on
  (its rows are most of ``presets/tables/measurements.csv``).
* **mobile NPUs, PIM, chiplet and ASIC designs (TPU, Gaudi, research designs) -> generic**: no
  stack profile applies. Phone NPUs run vendor runtimes (Qualcomm QNN / AI Hub, MediaTek
  NeuroPilot), TPUs run JetStream / vLLM-TPU and Gaudi runs vLLM's Gaudi fork or Optimum
  Habana, none with a profile fitted here (vLLM's profile is fitted on GPU kernels); PIM and
  chiplet presets are research designs with no published software stack.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError, did_you_mean
from ..hardware import Hardware, HardwareClass
from .efficiency import FRAMEWORKS, GENERIC, efficiency_for, resolve_framework

DEFAULT = "default"
DEFAULT_NAMES = (DEFAULT, "auto")
GENERIC_LABEL = "generic (class fit)"
GENERIC_REASON = "stack-agnostic class fit, wider error"
CHOSEN_REASON = "chosen"

# Plural nouns of the classes, as a reason reads them ("default for datacenter GPUs").
CLASS_NOUNS = {HardwareClass.DATACENTER_GPU: "datacenter GPUs",
               HardwareClass.CONSUMER_GPU: "consumer GPUs",
               HardwareClass.UNIFIED_SOC: "unified-memory SoCs",
               HardwareClass.CPU: "CPUs",
               HardwareClass.MOBILE_NPU: "mobile NPUs",
               HardwareClass.PIM: "processing-in-memory designs",
               HardwareClass.CHIPLET: "chiplet designs",
               HardwareClass.ASIC: "ASICs"}

# Hardware class -> its default stack (the module docstring gives the reasons and sources).
CLASS_DEFAULT_STACKS = {HardwareClass.DATACENTER_GPU: "vllm",
                        HardwareClass.CONSUMER_GPU: "llama.cpp",
                        HardwareClass.UNIFIED_SOC: "llama.cpp",
                        HardwareClass.CPU: "llama.cpp",
                        HardwareClass.MOBILE_NPU: GENERIC,
                        HardwareClass.PIM: GENERIC,
                        HardwareClass.CHIPLET: GENERIC,
                        HardwareClass.ASIC: GENERIC}


@dataclass(frozen=True)
class Stack:
    """A resolved inference stack: ``name`` (a profile of ``FRAMEWORKS`` or ``"generic"``),
    its ``label``, whether it is the hardware class's ``default`` (not named by the user) and
    the ``reason`` shown with it."""
    name: str
    label: str
    default: bool
    reason: str

    @property
    def caption(self) -> str:
        """One line naming the stack and why: "vLLM — default for datacenter GPUs"."""
        return f"{self.label} — {self.reason}"

    def to_dict(self) -> dict:
        """The ``stack`` field of every CLI result and export."""
        return {"name": self.name, "label": self.label, "default": self.default,
                "reason": self.reason}


def stack_label(name: str) -> str:
    """The display label of a stack name (``"generic"`` or a profile's CLI name)."""
    return GENERIC_LABEL if name == GENERIC else FRAMEWORKS[name][0]


def default_stack(hardware: Hardware) -> Stack:
    """The default stack of ``hardware``'s class (custom and design-space hardware included:
    only the class counts)."""
    name = CLASS_DEFAULT_STACKS[hardware.hw_class]
    noun = CLASS_NOUNS[hardware.hw_class]
    reason = (f"default for {noun}" if name != GENERIC
              else f"default for {noun}: no stack profile applies")
    return Stack(name, stack_label(name), True, reason)


def is_default_request(requested: str | None) -> bool:
    """Whether ``requested`` asks for the class default (None, "", "default", "auto")."""
    return requested is None or str(requested).strip().lower() in ("", *DEFAULT_NAMES)


def stack_name(requested: str) -> str:
    """The canonical name of an explicitly requested stack ("generic" or a profile's CLI
    name); ConfigError with close matches and every accepted name otherwise."""
    key = str(requested).strip().lower()
    if key == GENERIC:
        return GENERIC
    try:
        return resolve_framework(key)
    except ConfigError:
        known = (DEFAULT, GENERIC, *FRAMEWORKS)
        raise ConfigError(f"unknown framework {str(requested)!r}"
                          f"{did_you_mean(key, known)} (known: {', '.join(known)})") from None


def resolve_stack(hardware: Hardware, requested: str | None = None) -> Stack:
    """The stack an estimate of ``hardware`` runs under when ``requested`` is asked for."""
    if is_default_request(requested):
        return default_stack(hardware)
    name = stack_name(requested)
    return Stack(name, stack_label(name), False,
                 GENERIC_REASON if name == GENERIC else CHOSEN_REASON)


def with_stack(hardware: Hardware, requested: str | None = None) -> tuple[Hardware, Stack]:
    """``hardware`` running under the resolved stack (its ``efficiency`` set to the stack's
    profile; unchanged for generic, whose values ``Hardware.effective_efficiency`` already
    gives) and the stack."""
    stack = resolve_stack(hardware, requested)
    if stack.name == GENERIC:
        return hardware, stack
    return replace(hardware, efficiency=efficiency_for(hardware, stack.name)), stack
