"""A CPU platform for real verl, registered through verl's own plugin hook (test harness only).

verl 0.9.1 ships CUDA, NPU and ROCm platforms and falls back to CUDA (nccl) when none is found, so
on a CPU-only machine its workers cannot start. verl imports every module named in
`VERL_USE_EXTERNAL_MODULES` when `verl` is imported (in the driver and in every Ray worker); this
module is named there, registers the platform "cpu" and, with `VERL_PLATFORM=cpu`, verl picks it.

Two shims, and only these, adapt upstream code written for an accelerator:
- verl asks torch.distributed for `cpu:gloo,<device>:<backend>`; with the device "cpu" that names
  the CPU twice, which torch refuses: the duplicate is dropped (plain gloo);
- FSDP1's `sync_module_states` (verl hard-codes True; broadcasting module states needs an
  accelerator) is turned off. Every rank loads the weights itself instead (the tiny model ties its
  embeddings, so verl does not use meta tensors on the other ranks).
"""

from __future__ import annotations

import functools
import os
import types
from contextlib import contextmanager
from typing import Any, Optional

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


def _device_module() -> types.SimpleNamespace:
    """torch.cpu plus the torch.cuda calls verl makes on its device module (no-ops or CPU answers)."""
    module = types.SimpleNamespace(**{name: getattr(torch.cpu, name) for name in dir(torch.cpu) if not name.startswith("_")})
    for name in ("empty_cache", "ipc_collect", "set_per_process_memory_fraction", "set_device", "reset_peak_memory_stats"):
        setattr(module, name, _nothing)
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        setattr(module, name, lambda *_a, **_k: 0)
    module.mem_get_info = lambda *_a, **_k: (0, 0)
    module.get_device_name = lambda *_a, **_k: "cpu"
    module.manual_seed = torch.manual_seed
    module.manual_seed_all = torch.manual_seed
    module.get_rng_state = torch.get_rng_state
    module.set_rng_state = torch.set_rng_state
    module.is_available = lambda: True
    module.current_device = lambda: "cpu"
    module.device_count = lambda: 1
    return module


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform interface answered for the CPU (gloo collectives, Ray CPU resources)."""

    _module = _device_module()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.SimpleNamespace:
        return self._module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return os.environ.get("VERL_PLATFORM", "") == "cpu"

    def current_device(self) -> Any:
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "RLPATCH_REHEARSAL_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Any:
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def _without_sync_module_states() -> None:
    """FSDP1 with sync_module_states=False: its broadcast needs an accelerator (see the module doc)."""
    from torch.distributed.fsdp import FullyShardedDataParallel

    original = FullyShardedDataParallel.__init__
    if getattr(original, "_rehearsal_cpu", False):
        return

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["sync_module_states"] = False
        original(self, *args, **kwargs)

    init._rehearsal_cpu = True  # type: ignore[attr-defined]
    FullyShardedDataParallel.__init__ = init  # type: ignore[method-assign]


def _one_cpu_backend() -> None:
    """init_process_group with `cpu:gloo,cpu:gloo` (verl's string on this platform) as plain gloo."""
    import torch.distributed

    original = torch.distributed.init_process_group
    if getattr(original, "_rehearsal_cpu", False):
        return

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend")
        if isinstance(backend, str) and backend.replace(" ", "") == "cpu:gloo,cpu:gloo":
            kwargs["backend"] = "gloo"
        return original(*args, **kwargs)

    init_process_group._rehearsal_cpu = True  # type: ignore[attr-defined]
    torch.distributed.init_process_group = init_process_group


_without_sync_module_states()
_one_cpu_backend()
