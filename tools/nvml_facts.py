# tools/nvml_facts.py — run on a GPU machine with PyTorch and nvidia-ml-py (pynvml): the
# NVML, GPM and CUPTI facts docs/GPU.md records for issue 27 (the sample period of NVML's
# utilisation, GPM SM activity, per-process memory, where libcupti is).
# Facts for issue 27 (NVML windowed utilisation, GPM SM activity, CUPTI), on the lent card.
import time, ctypes, os, glob, sys
import pynvml as N
N.nvmlInit()
h = N.nvmlDeviceGetHandleByIndex(0)
print("driver", N.nvmlSystemGetDriverVersion(), "nvml", N.nvmlSystemGetNVMLVersion())
# 1. utilisation samples: how often the driver records one, and what a busy/idle pattern reads
import torch
x = torch.randn(8192, 8192, device="cuda")
def busy(sec):
    t = time.time()
    while time.time() - t < sec:
        y = x @ x
    torch.cuda.synchronize()
t0 = int(time.time() * 1e6)
for k in range(3):
    busy(0.5); time.sleep(0.5)
try:
    typ, samples = N.nvmlDeviceGetSamples(h, N.NVML_GPU_UTILIZATION_SAMPLES, t0)
    ts = [s.timeStamp for s in samples]
    vals = [s.sampleValue.uiVal for s in samples]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    print("util samples", len(samples), "period us median", sorted(gaps)[len(gaps)//2] if gaps else None)
    print("values", vals[:40])
except N.NVMLError as e:
    print("nvmlDeviceGetSamples:", e)
print("getUtilizationRates", N.nvmlDeviceGetUtilizationRates(h).gpu)
# 2. GPM (Hopper): SM activity
try:
    sup = N.nvmlGpmQueryDeviceSupport(h)
    print("GPM supported", sup.isSupportedDevice)
    if sup.isSupportedDevice:
        s1 = N.nvmlGpmSampleAlloc(); s2 = N.nvmlGpmSampleAlloc()
        N.nvmlGpmSampleGet(h, s1); busy(0.5); N.nvmlGpmSampleGet(h, s2)
        for mid, name in [(N.NVML_GPM_METRIC_SM_OCCUPANCY, "sm_occupancy"), (N.NVML_GPM_METRIC_GRAPHICS_UTIL, "graphics_util"), (N.NVML_GPM_METRIC_SM_UTIL, "sm_util")]:
            m = N.c_nvmlGpmMetricsGet_t(); m.version = N.NVML_GPM_METRICS_GET_VERSION; m.numMetrics = 1
            m.sample1 = s1; m.sample2 = s2; m.metrics[0].metricId = mid
            N.nvmlGpmMetricsGet(m); print("GPM", name, m.metrics[0].value)
except Exception as e:
    print("GPM:", type(e).__name__, e)
# 3. per-process memory
try:
    for p in N.nvmlDeviceGetComputeRunningProcesses(h):
        print("process", p.pid, "used MiB", (p.usedGpuMemory or 0) / 2**20, "me" if p.pid == os.getpid() else "")
except N.NVMLError as e:
    print("processes:", e)
# 4. CUPTI library where the wheels put it
print("cupti", glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "libcupti*"))[:3])
