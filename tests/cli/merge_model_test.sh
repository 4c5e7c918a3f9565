#!/usr/bin/env bash
# The merge model test (tests/merge/model.py): random histories merged by layerfs and by git.
set -euo pipefail
exec python3 "$(dirname "$0")/../merge/model.py" "$1" "${MERGE_MODEL_SEEDS:-40}"
