#!/usr/bin/env bash
# What the GPU host offers a kernel box (issue 35): cgroup v2 and its delegation, namespaces,
# bubblewrap/systemd-run, and whether CUDA works inside new PID/IPC/mount namespaces.
# Usage (device tool): bash tools/h200/isolation_probe.sh   (writes $OUT/isolation_probe.txt)
set -u
out=${OUT:-/tmp}/isolation_probe.txt
{
echo "== kernel"; uname -r
echo "== /proc/self/cgroup"; cat /proc/self/cgroup
echo "== cgroup mounts"; mount | grep -E 'cgroup' || echo none
echo "== controllers"; cat /sys/fs/cgroup/cgroup.controllers 2>&1
echo "== subtree_control"; cat /sys/fs/cgroup/cgroup.subtree_control 2>&1
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "own v2 cgroup: $own"
d=/sys/fs/cgroup${own}/rg-probe-$$
mkdir "$d" 2>&1 && echo "mkdir in own cgroup: ok" && ls "$d" | tr '\n' ' ' && echo && rmdir "$d"
echo "== tools"; for t in unshare bwrap systemd-run nsenter setpriv capsh; do printf '%s: ' "$t"; command -v "$t" || echo missing; done
echo "== unshare pid/ipc/mount"
unshare --pid --ipc --mount --fork --mount-proc sh -c 'echo pid in ns: $$; ls /proc | grep -c "^[0-9]"' 2>&1
echo "== user ns"; cat /proc/sys/kernel/unprivileged_userns_clone 2>&1; cat /proc/sys/user/max_user_namespaces 2>&1
unshare --user --map-root-user true 2>&1 && echo "user ns: ok"
echo "== CUDA inside unshare"
unshare --pid --ipc --mount --fork --mount-proc sh -c 'mount -t tmpfs tmpfs /dev/shm && mount -t tmpfs tmpfs /tmp && python3 -c "
import torch,time
x=torch.randn(4096,4096,device=\"cuda\")
torch.cuda.synchronize(); t=time.perf_counter()
for _ in range(50): y=x@x
torch.cuda.synchronize(); print(\"cuda in ns ok\", torch.cuda.get_device_name(), round((time.perf_counter()-t)*1000/50,3),\"ms/matmul\")
"' 2>&1
echo "== CUDA outside"
python3 -c "
import torch,time
x=torch.randn(4096,4096,device='cuda')
torch.cuda.synchronize(); t=time.perf_counter()
for _ in range(50): y=x@x
torch.cuda.synchronize(); print('cuda outside ok', round((time.perf_counter()-t)*1000/50,3),'ms/matmul')
" 2>&1
echo "== id/caps"; id; grep Cap /proc/self/status
echo "== nvidia devs"; ls -l /dev/nvidia* 2>&1 | head
} > "$out" 2>&1
cat "$out"
