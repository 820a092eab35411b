#!/usr/bin/env bash
# Prints the first Python 3 interpreter that has the modules the scripts need
# (numpy, regex, matplotlib, scipy). Debian's /usr/bin/python3 is tried first because
# its packages come from apt; the one on PATH may reach no package registry.
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy, regex, matplotlib, scipy' 2>/dev/null; then
    echo "$p"; exit 0
  fi
done
echo /usr/bin/python3
