#!/usr/bin/env bash
# Prints the build folder whose trainer the scripts run for these trainer arguments:
# build_cpu (make cpu and make run: no CUDA backend, no nvcc) when they say --device cpu,
# else build (make: the CUDA backend where nvcc is found). Both are there after make.
for ((k = 1; k <= $#; k++)); do
  a=${!k} n=$((k + 1))
  if [ "$a" = --device=cpu ] || { [ "$a" = --device ] && [ "${!n:-}" = cpu ]; }; then
    echo build_cpu; exit 0
  fi
done
echo build
