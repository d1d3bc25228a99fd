"""The version of the JSON the guard and the harness exchange (the spec it reads, the result
it writes). Bump it on any change the other side would misread. Standard library only: run.py
loads this file by path inside the arm's environment, and the guard imports it."""

# 2: the mix pass settles before its timed steps and comes before every profiled pass, so its
# figures are not taken after a profiler session; its result holds its own profiled trace
# 3: "world_size" in the spec, one process per rank that joins the others before the workload
# is made; "rank" and "world_size" in its result, its traces named by rank
PROTOCOL_VERSION = 3
