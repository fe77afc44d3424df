#!/bin/sh
# Compiler launcher of windowed.cu: runs the nvcc command it is given and keeps its
# output (the ptxas -v resource usage of every kernel and arch) in LOG for
# cuda_resource_table. Usage: capture_ptxas.sh LOG COMMAND...
log="$1"
shift
"$@" > "$log.tmp" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  cat "$log.tmp" >&2
  rm -f "$log.tmp"
  exit $rc
fi
mv "$log.tmp" "$log"
