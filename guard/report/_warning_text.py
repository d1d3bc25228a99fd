"""The report's warnings about its run (compare's `RunWarning`), a sentence each, plain: where
they are shown, they are escaped (an arm's name and NVML's reasons are data). A report before
schema 13 kept each as its sentence, which is said as it was kept."""

from __future__ import annotations

from guard.compare import RunWarning


def warning_text(w: RunWarning | str) -> str:
    if isinstance(w, str):
        return w
    if w.kind == "credential_kept":
        return (f"the checkout keeps a credential in .git/config ({', '.join(w.keys)}), which the pull request's "
                "code can read: check out with `persist-credentials: false`")
    if w.kind == "no_fingerprint":
        numbers = f"repeat {w.repeats[0]}" if len(w.repeats) == 1 else "repeats " + ", ".join(map(str, w.repeats))
        return (f"arm '{w.arm}' {numbers}{' (every repeat)' if w.every else ''}: no GPU fingerprint ({w.reason}), "
                "while other repeats have one; whether it ran on the same GPU and software cannot be checked")
    where = f"arm '{w.arm}' repeat {w.repeat}"
    if w.kind == "clocks_held":
        return (f"{where}: at its {w.phase} the GPU's clocks were held back by {', '.join(w.reasons)}; "
                "its timings may be slow: check the runner's cooling, power and other load")
    if w.kind == "sm_clock_fell":
        return (f"{where}: the SM clock fell from {w.start_mhz} MHz at the start to {w.end_mhz} MHz at the end; "
                "the GPU was likely throttling during the run")
    if w.kind == "held_down":
        by = "the power limit" if w.by == "power" else "temperature"
        return (f"{where}: clocks were held down by {by} for {w.held_s:.2f} s of the {w.run_s:.1f} s run; "
                "its timings may be slow")
    if w.kind == "other_processes":
        listed = ", ".join(f"pid {p.pid} ({p.used_memory_mib:g} MiB)" if p.used_memory_mib is not None
                           else f"pid {p.pid} (memory unknown)" for p in w.processes)
        return (f"{where}: other processes were on the GPU: {listed}; they compete for it: "
                "run the guard on an otherwise idle GPU")
    return (f"{where}: persistence mode is off, so the GPU may start each process at idle clocks and "
            "ramp up; enable it on the runner (nvidia-smi -pm 1)")
