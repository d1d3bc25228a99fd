"""The version of the JSON the guard and the harness exchange (the spec it reads, the result
it writes). Bump it on any change the other side would misread. Standard library only: run.py
loads this file by path inside the arm's environment, and the guard imports it."""

# 2: the mix pass settles before its timed steps and comes before every profiled pass, so its
# figures are not taken after a profiler session; its result holds its own profiled trace
# 3: "world_size" in the spec, one process per rank that joins the others before the workload
# is made; "rank" and "world_size" in its result, its traces named by rank
# 4: a process's figures are means over its steps, which the guard computes again from the lists
# its result now also holds: each end-to-end pass's time ("end_to_end_pass_ms"), the end-to-end
# pass's CUDA-event step times ("end_to_end_gpu_ms") and the mix's end-to-end step times
# ("end_to_end_step_ms"); a CPU's "step_ms" are the end-to-end pass's wall step times
PROTOCOL_VERSION = 4
