#!/bin/bash
# Reproduces issue 11 part 3: a large topology the state machine refuses.
# usage: scripts/refused-topology.sh BINARY OUTDIR   (figures: docs/benchmarks.md)
# BIG (default /tmp/jobfabric-t100k.yaml, generated once, about 36 MB) is a
# 100,000-GPU topology without the busy server's 16 GPUs: the state machine
# must refuse it. Prints raft.db size, RSS, restart time and data-dir modes.
set -u
BIN=$1; OUT=$2; PORT=${PORT:-7391}; BIG=${BIG:-/tmp/jobfabric-t100k.yaml}
rm -rf $OUT; mkdir -p $OUT
D=$OUT/data
export JOBFABRIC_SERVER=http://127.0.0.1:$PORT
$BIN topology generate --stripes 1 --servers-per-stripe 2 --gpus-per-server 16 > $OUT/t0.yaml
[ -f "$BIG" ] || $BIN topology generate --stripes 50 --servers-per-stripe 250 > "$BIG"
ls -la "$BIG"
start() { $BIN server --data-dir $D --listen 127.0.0.1:$PORT --fabric-driver none --log-level warn > $OUT/server.log 2>&1 & echo $! > $OUT/pid;
  for i in $(seq 1 1200); do [ -s $D/admin.token ] && curl -sf $JOBFABRIC_SERVER/v1/health >/dev/null && break; sleep 0.05; done; }
rss() { grep -E 'VmRSS|VmHWM' /proc/$(cat $OUT/pid)/status | tr '\n' ' '; echo; }
start
export JOBFABRIC_TOKEN=$(cat $D/admin.token)
$BIN topology apply -f $OUT/t0.yaml
$BIN tenant create t1 >/dev/null
$BIN workspace create t1/w1 --borrow-limit 32 >/dev/null
$BIN job submit --workspace t1/w1 --gpus 16 --gpus-per-node 16 --gpu-model H100-80GB >/dev/null
sleep 3; $BIN job list | head -3
echo "raft.db before: $(du -b $D/raft/raft.db 2>/dev/null || ls -la $D/raft)"; rss
for i in 1 2; do /usr/bin/time -f "apply %e s, client maxrss %M kB" $BIN topology apply -f "$BIG" 2>&1 | tail -2; done
echo "raft.db after two refused: $(du -b $D/raft/raft.db)"; rss
sleep 20; echo "after 20 s:"; rss
kill $(cat $OUT/pid); wait $(cat $OUT/pid) 2>/dev/null
t0=$(date +%s.%N); start; t1=$(date +%s.%N)
for i in $(seq 1 1200); do $BIN tenant create r$i >/dev/null 2>&1 && break; sleep 0.05; done; t2=$(date +%s.%N)
echo "restart to healthy: $(echo "$t1 - $t0" | bc) s; to first write applied: $(echo "$t2 - $t0" | bc) s"; rss
$BIN job list | head -3
find $D -exec stat -c '%a %n' {} \; 
kill $(cat $OUT/pid); wait $(cat $OUT/pid) 2>/dev/null
